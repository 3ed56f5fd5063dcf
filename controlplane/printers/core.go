package printers

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
)

// Pods prints NAME READY STATUS RESTARTS AGE, wide: IP NODE NOMINATED NODE READINESS GATES.
var Pods = New(func(o runtime.Object) []any {
	p := o.(*corev1.Pod)
	ready, restarts := 0, int64(0)
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Ready {
			ready++
		}
		restarts += int64(cs.RestartCount)
	}
	gates := "<none>"
	if len(p.Spec.ReadinessGates) > 0 {
		var n int
		for _, g := range p.Spec.ReadinessGates {
			for _, c := range p.Status.Conditions {
				if c.Type == g.ConditionType && c.Status == corev1.ConditionTrue {
					n++
				}
			}
		}
		gates = fmt.Sprintf("%d/%d", n, len(p.Spec.ReadinessGates))
	}
	return []any{fmt.Sprintf("%d/%d", ready, len(p.Spec.Containers)), PodStatus(p), strconv.FormatInt(restarts, 10), Age(p.CreationTimestamp),
		none(p.Status.PodIP), none(p.Spec.NodeName), none(p.Status.NominatedNodeName), gates}
},
	Column{Name: "Ready", Description: "The aggregate readiness state of this pod for accepting traffic."},
	Column{Name: "Status", Description: "The aggregate status of the containers in this pod."},
	Column{Name: "Restarts", Type: "string", Description: "The number of times the containers in this pod have been restarted."},
	AgeColumn,
	Column{Name: "IP", Wide: true, Description: "IP address allocated to the pod."},
	Column{Name: "Node", Wide: true, Description: "Name of the Node this pod is assigned to."},
	Column{Name: "Nominated Node", Wide: true, Description: "Name of the node where the pod may be scheduled."},
	Column{Name: "Readiness Gates", Wide: true, Description: "Readiness gates of the pod."},
)

// PodStatus is the STATUS column of a pod: "Init:<reason>" or "Init:<done>/<total>" while init
// containers run, then the reason of the first waiting or terminated container, Terminating
// while being deleted, the phase otherwise.
func PodStatus(p *corev1.Pod) string {
	reason := string(p.Status.Phase)
	if p.Status.Reason != "" {
		reason = p.Status.Reason
	}
	// As upstream: the first init container that has not succeeded (sidecars once started
	// excepted) names the status, and the app containers only count once initialization is over.
	initializing := false
	for i, cs := range p.Status.InitContainerStatuses {
		if t := cs.State.Terminated; t != nil && t.ExitCode == 0 {
			continue
		}
		if cs.Started != nil && *cs.Started && restartableInit(p, cs.Name) {
			continue
		}
		initializing = true
		switch t, w := cs.State.Terminated, cs.State.Waiting; {
		case t != nil && t.Reason != "":
			reason = "Init:" + t.Reason
		case t != nil:
			reason = fmt.Sprintf("Init:ExitCode:%d", t.ExitCode)
		case w != nil && w.Reason != "" && w.Reason != "PodInitializing":
			reason = "Init:" + w.Reason
		default:
			reason = fmt.Sprintf("Init:%d/%d", i, len(p.Spec.InitContainers))
		}
		break
	}
	for i := len(p.Status.ContainerStatuses) - 1; i >= 0 && (!initializing || podInitialized(p)); i-- {
		cs := p.Status.ContainerStatuses[i]
		switch {
		case cs.State.Waiting != nil && cs.State.Waiting.Reason != "":
			reason = cs.State.Waiting.Reason
		case cs.State.Terminated != nil && cs.State.Terminated.Reason != "":
			reason = cs.State.Terminated.Reason
		}
	}
	if p.DeletionTimestamp != nil {
		reason = "Terminating"
	}
	return reason
}

func restartableInit(p *corev1.Pod, name string) bool {
	for _, c := range p.Spec.InitContainers {
		if c.Name == name {
			return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
		}
	}
	return false
}

func podInitialized(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodInitialized {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Nodes prints NAME STATUS ROLES AGE VERSION, wide: INTERNAL-IP EXTERNAL-IP OS-IMAGE
// KERNEL-VERSION CONTAINER-RUNTIME.
var Nodes = New(func(o runtime.Object) []any {
	n := o.(*corev1.Node)
	status := "Unknown"
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			if c.Status == corev1.ConditionTrue {
				status = "Ready"
			} else {
				status = "NotReady"
			}
		}
	}
	if n.Spec.Unschedulable {
		status += ",SchedulingDisabled"
	}
	var roles []string
	for k := range n.Labels {
		if r, ok := strings.CutPrefix(k, "node-role.kubernetes.io/"); ok && r != "" {
			roles = append(roles, r)
		}
	}
	sort.Strings(roles)
	addr := func(t corev1.NodeAddressType) string {
		for _, a := range n.Status.Addresses {
			if a.Type == t {
				return a.Address
			}
		}
		return "<none>"
	}
	info := n.Status.NodeInfo
	return []any{status, none(strings.Join(roles, ",")), Age(n.CreationTimestamp), info.KubeletVersion,
		addr(corev1.NodeInternalIP), addr(corev1.NodeExternalIP), none(info.OSImage), none(info.KernelVersion), none(info.ContainerRuntimeVersion)}
},
	Column{Name: "Status", Description: "The status of the node"},
	Column{Name: "Roles", Description: "The roles of the node"},
	AgeColumn,
	Column{Name: "Version", Description: "Kubelet Version reported by the node."},
	Column{Name: "Internal-IP", Wide: true, Description: "List of addresses reachable to the node."},
	Column{Name: "External-IP", Wide: true, Description: "List of addresses reachable to the node."},
	Column{Name: "OS-Image", Wide: true, Description: "OS Image reported by the node."},
	Column{Name: "Kernel-Version", Wide: true, Description: "Kernel Version reported by the node."},
	Column{Name: "Container-Runtime", Wide: true, Description: "Container Runtime Version reported by the node."},
)

// Services prints NAME TYPE CLUSTER-IP EXTERNAL-IP PORT(S) AGE, wide: SELECTOR.
var Services = New(func(o runtime.Object) []any {
	s := o.(*corev1.Service)
	clusterIP := none(s.Spec.ClusterIP)
	external := "<none>"
	switch s.Spec.Type {
	case corev1.ServiceTypeExternalName:
		external = s.Spec.ExternalName
	case corev1.ServiceTypeLoadBalancer:
		var ips []string
		for _, in := range s.Status.LoadBalancer.Ingress {
			ips = append(ips, in.IP+in.Hostname)
		}
		ips = append(ips, s.Spec.ExternalIPs...)
		external = "<pending>"
		if len(ips) > 0 {
			external = strings.Join(ips, ",")
		}
	default:
		if len(s.Spec.ExternalIPs) > 0 {
			external = strings.Join(s.Spec.ExternalIPs, ",")
		}
	}
	var ports []string
	for _, p := range s.Spec.Ports {
		if p.NodePort != 0 {
			ports = append(ports, fmt.Sprintf("%d:%d/%s", p.Port, p.NodePort, p.Protocol))
		} else {
			ports = append(ports, fmt.Sprintf("%d/%s", p.Port, p.Protocol))
		}
	}
	return []any{string(s.Spec.Type), clusterIP, external, none(strings.Join(ports, ",")), Age(s.CreationTimestamp),
		none(labels.FormatLabels(s.Spec.Selector))}
},
	Column{Name: "Type", Description: "The type of the service."},
	Column{Name: "Cluster-IP", Description: "The IP address of the service."},
	Column{Name: "External-IP", Description: "The external IPs of the service."},
	Column{Name: "Port(s)", Description: "The ports of the service."},
	AgeColumn,
	Column{Name: "Selector", Wide: true, Description: "The selector of the service."},
)

func containersAndImages(spec corev1.PodSpec) (string, string) {
	var names, images []string
	for _, c := range spec.Containers {
		names = append(names, c.Name)
		images = append(images, c.Image)
	}
	return strings.Join(names, ","), strings.Join(images, ",")
}

func selector(s *metav1.LabelSelector) string {
	sel, err := metav1.LabelSelectorAsSelector(s)
	if err != nil || sel.Empty() {
		return "<none>"
	}
	return sel.String()
}

// Endpoints prints NAME ENDPOINTS AGE.
var Endpoints = New(func(o runtime.Object) []any {
	ep := o.(*corev1.Endpoints)
	var list []string
	for _, s := range ep.Subsets {
		for _, a := range s.Addresses {
			if len(s.Ports) == 0 {
				list = append(list, a.IP)
			}
			for _, p := range s.Ports {
				list = append(list, fmt.Sprintf("%s:%d", a.IP, p.Port))
			}
		}
	}
	return []any{firstN(list, 3), Age(ep.CreationTimestamp)}
},
	Column{Name: "Endpoints", Description: "Endpoints of the service."},
	AgeColumn,
)

func firstN(items []string, n int) string {
	if len(items) == 0 {
		return "<unset>"
	}
	if len(items) > n {
		return strings.Join(items[:n], ",") + fmt.Sprintf(" + %d more...", len(items)-n)
	}
	return strings.Join(items, ",")
}

// eventColumns are upstream's: LAST SEEN TYPE REASON OBJECT MESSAGE, wide adds SUBOBJECT,
// SOURCE, FIRST SEEN, COUNT and NAME.
var eventColumns = []Column{
	{Name: "Last Seen"}, {Name: "Type"}, {Name: "Reason"}, {Name: "Object"},
	{Name: "Subobject", Wide: true}, {Name: "Source", Wide: true}, {Name: "Message"},
	{Name: "First Seen", Wide: true}, {Name: "Count", Type: "integer", Wide: true}, {Name: "Name", Wide: true},
}

// Events prints core/v1 events as `kubectl get events` does.
var Events = Custom(func(o runtime.Object) []any { return eventRow(o.(*corev1.Event)) }, eventColumns...)

func eventRow(e *corev1.Event) []any {
	last := e.LastTimestamp
	if last.IsZero() && e.Series != nil {
		last = metav1.Time{Time: e.Series.LastObservedTime.Time}
	}
	if last.IsZero() {
		last = metav1.Time{Time: e.EventTime.Time}
	}
	if last.IsZero() {
		last = e.CreationTimestamp
	}
	first := e.FirstTimestamp
	if first.IsZero() {
		first = metav1.Time{Time: e.EventTime.Time}
	}
	obj := strings.ToLower(e.InvolvedObject.Kind) + "/" + e.InvolvedObject.Name
	source := e.Source.Component
	if source == "" {
		source = e.ReportingController
	}
	if e.Source.Host != "" {
		source += ", " + e.Source.Host
	}
	count := int64(e.Count)
	if e.Series != nil {
		count = int64(e.Series.Count)
	}
	if count == 0 {
		count = 1
	}
	return []any{Age(last), e.Type, e.Reason, obj, e.InvolvedObject.FieldPath, source, strings.TrimSpace(e.Message),
		Age(first), count, e.Name}
}

// Namespaces prints NAME STATUS AGE.
var Namespaces = New(func(o runtime.Object) []any {
	ns := o.(*corev1.Namespace)
	return []any{string(ns.Status.Phase), Age(ns.CreationTimestamp)}
},
	Column{Name: "Status", Description: "The status of the namespace"},
	AgeColumn,
)

// ConfigMaps prints NAME DATA AGE.
var ConfigMaps = New(func(o runtime.Object) []any {
	cm := o.(*corev1.ConfigMap)
	return []any{int64(len(cm.Data) + len(cm.BinaryData)), Age(cm.CreationTimestamp)}
}, Column{Name: "Data", Type: "integer"}, AgeColumn)

// PodTemplates prints NAME CONTAINERS IMAGES POD LABELS, as upstream.
var PodTemplates = New(func(o runtime.Object) []any {
	t := o.(*corev1.PodTemplate)
	var names, images []string
	for _, c := range t.Template.Spec.Containers {
		names, images = append(names, c.Name), append(images, c.Image)
	}
	return []any{strings.Join(names, ","), strings.Join(images, ","), labels.FormatLabels(t.Template.Labels)}
}, Column{Name: "Containers", Description: "Names of each container in the template."},
	Column{Name: "Images", Description: "Images referenced by each container in the template."},
	Column{Name: "Pod Labels", Description: "The labels for the pod template."})

// Secrets prints NAME TYPE DATA AGE.
var Secrets = New(func(o runtime.Object) []any {
	s := o.(*corev1.Secret)
	return []any{string(s.Type), int64(len(s.Data)), Age(s.CreationTimestamp)}
}, Column{Name: "Type"}, Column{Name: "Data", Type: "integer"}, AgeColumn)

// ServiceAccounts prints NAME SECRETS AGE.
var ServiceAccounts = New(func(o runtime.Object) []any {
	sa := o.(*corev1.ServiceAccount)
	return []any{int64(len(sa.Secrets)), Age(sa.CreationTimestamp)}
}, Column{Name: "Secrets", Type: "integer"}, AgeColumn)

// ReplicationControllers prints NAME DESIRED CURRENT READY AGE, wide: CONTAINERS IMAGES
// SELECTOR.
var ReplicationControllers = New(func(o runtime.Object) []any {
	rc := o.(*corev1.ReplicationController)
	want := int32(0)
	if rc.Spec.Replicas != nil {
		want = *rc.Spec.Replicas
	}
	var c, i string
	if rc.Spec.Template != nil {
		c, i = containersAndImages(rc.Spec.Template.Spec)
	}
	return []any{int64(want), int64(rc.Status.Replicas), int64(rc.Status.ReadyReplicas), Age(rc.CreationTimestamp), c, i,
		none(labels.SelectorFromSet(rc.Spec.Selector).String())}
},
	Column{Name: "Desired", Type: "integer", Description: "Number of desired pods."},
	Column{Name: "Current", Type: "integer", Description: "Number of actual replicas."},
	Column{Name: "Ready", Type: "integer", Description: "Number of ready replicas."},
	AgeColumn,
	Column{Name: "Containers", Wide: true, Description: "Names of each container in the template."},
	Column{Name: "Images", Wide: true, Description: "Images referenced by each container in the template."},
	Column{Name: "Selector", Wide: true, Description: "Label selector for pods."},
)

// accessModes renders access modes the way kubectl does (RWO,ROX,RWX,RWOP).
func accessModes(modes []corev1.PersistentVolumeAccessMode) string {
	short := map[corev1.PersistentVolumeAccessMode]string{corev1.ReadWriteOnce: "RWO", corev1.ReadOnlyMany: "ROX",
		corev1.ReadWriteMany: "RWX", corev1.ReadWriteOncePod: "RWOP"}
	var out []string
	seen := map[string]bool{}
	for _, m := range modes {
		if s := short[m]; s != "" && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return strings.Join(out, ",")
}

func volumeMode(m *corev1.PersistentVolumeMode) string {
	if m == nil {
		return "<unset>"
	}
	return string(*m)
}

func unset(s *string) string {
	if s == nil || *s == "" {
		return "<unset>"
	}
	return *s
}

// PersistentVolumes prints NAME CAPACITY ACCESS MODES RECLAIM POLICY STATUS CLAIM
// STORAGECLASS VOLUMEATTRIBUTESCLASS REASON AGE, wide: VOLUMEMODE.
var PersistentVolumes = New(func(o runtime.Object) []any {
	pv := o.(*corev1.PersistentVolume)
	claim := ""
	if r := pv.Spec.ClaimRef; r != nil {
		claim = r.Namespace + "/" + r.Name
	}
	phase := string(pv.Status.Phase)
	if pv.DeletionTimestamp != nil {
		phase = "Terminating"
	}
	size := pv.Spec.Capacity[corev1.ResourceStorage]
	return []any{size.String(), accessModes(pv.Spec.AccessModes), string(pv.Spec.PersistentVolumeReclaimPolicy), phase,
		claim, pv.Spec.StorageClassName, unset(pv.Spec.VolumeAttributesClassName), pv.Status.Reason, Age(pv.CreationTimestamp), volumeMode(pv.Spec.VolumeMode)}
},
	Column{Name: "Capacity"}, Column{Name: "Access Modes"}, Column{Name: "Reclaim Policy"}, Column{Name: "Status"},
	Column{Name: "Claim"}, Column{Name: "StorageClass"}, Column{Name: "VolumeAttributesClass"}, Column{Name: "Reason"}, AgeColumn,
	Column{Name: "VolumeMode", Wide: true},
)

// PersistentVolumeClaims prints NAME STATUS VOLUME CAPACITY ACCESS MODES STORAGECLASS
// VOLUMEATTRIBUTESCLASS AGE, wide: VOLUMEMODE.
var PersistentVolumeClaims = New(func(o runtime.Object) []any {
	c := o.(*corev1.PersistentVolumeClaim)
	phase := string(c.Status.Phase)
	if c.DeletionTimestamp != nil {
		phase = "Terminating"
	}
	size, modes := "", ""
	if c.Spec.VolumeName != "" {
		q := c.Status.Capacity[corev1.ResourceStorage]
		size, modes = q.String(), accessModes(c.Status.AccessModes)
	}
	class := ""
	if c.Spec.StorageClassName != nil {
		class = *c.Spec.StorageClassName
	}
	return []any{phase, c.Spec.VolumeName, size, modes, class, unset(c.Spec.VolumeAttributesClassName), Age(c.CreationTimestamp), volumeMode(c.Spec.VolumeMode)}
},
	Column{Name: "Status"}, Column{Name: "Volume"}, Column{Name: "Capacity"}, Column{Name: "Access Modes"},
	Column{Name: "StorageClass"}, Column{Name: "VolumeAttributesClass"}, AgeColumn, Column{Name: "VolumeMode", Wide: true},
)

// LimitRanges prints NAME CREATED AT.
var LimitRanges = New(func(o runtime.Object) []any {
	lr := o.(*corev1.LimitRange)
	return []any{lr.CreationTimestamp.UTC().Format("2006-01-02T15:04:05Z")}
}, Column{Name: "Created At", Type: "date"})

// ResourceQuotas prints NAME AGE REQUEST LIMIT, the used/hard of each resource.
var ResourceQuotas = New(func(o runtime.Object) []any {
	q := o.(*corev1.ResourceQuota)
	var req, lim []string
	names := make([]string, 0, len(q.Status.Hard))
	for k := range q.Status.Hard {
		names = append(names, string(k))
	}
	sort.Strings(names)
	for _, k := range names {
		hard := q.Status.Hard[corev1.ResourceName(k)]
		used := q.Status.Used[corev1.ResourceName(k)]
		pair := fmt.Sprintf("%s: %s/%s", k, used.String(), hard.String())
		if strings.HasPrefix(k, "limits.") {
			lim = append(lim, pair)
		} else {
			req = append(req, pair)
		}
	}
	return []any{Age(q.CreationTimestamp), strings.Join(req, ", "), strings.Join(lim, ", ")}
}, AgeColumn, Column{Name: "Request"}, Column{Name: "Limit"})
