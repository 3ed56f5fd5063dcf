package printers

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
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

// Deployments prints NAME READY UP-TO-DATE AVAILABLE AGE, wide: CONTAINERS IMAGES SELECTOR.
var Deployments = New(func(o runtime.Object) []any {
	d := o.(*appsv1.Deployment)
	want := int32(0)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	c, i := containersAndImages(d.Spec.Template.Spec)
	return []any{fmt.Sprintf("%d/%d", d.Status.ReadyReplicas, want), int64(d.Status.UpdatedReplicas),
		int64(d.Status.AvailableReplicas), Age(d.CreationTimestamp), c, i, selector(d.Spec.Selector)}
},
	Column{Name: "Ready", Description: "Number of the pod with ready state"},
	Column{Name: "Up-to-date", Type: "integer", Description: "Total number of non-terminated pods targeted by this deployment that have the desired template spec."},
	Column{Name: "Available", Type: "integer", Description: "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment."},
	AgeColumn,
	Column{Name: "Containers", Wide: true, Description: "Names of each container in the template."},
	Column{Name: "Images", Wide: true, Description: "Images referenced by each container in the template."},
	Column{Name: "Selector", Wide: true, Description: "Label selector for pods."},
)

// ReplicaSets prints NAME DESIRED CURRENT READY AGE, wide: CONTAINERS IMAGES SELECTOR.
var ReplicaSets = New(func(o runtime.Object) []any {
	rs := o.(*appsv1.ReplicaSet)
	want := int32(0)
	if rs.Spec.Replicas != nil {
		want = *rs.Spec.Replicas
	}
	c, i := containersAndImages(rs.Spec.Template.Spec)
	return []any{int64(want), int64(rs.Status.Replicas), int64(rs.Status.ReadyReplicas), Age(rs.CreationTimestamp), c, i, selector(rs.Spec.Selector)}
},
	Column{Name: "Desired", Type: "integer", Description: "Number of desired pods."},
	Column{Name: "Current", Type: "integer", Description: "Number of actual replicas."},
	Column{Name: "Ready", Type: "integer", Description: "Number of ready replicas."},
	AgeColumn,
	Column{Name: "Containers", Wide: true, Description: "Names of each container in the template."},
	Column{Name: "Images", Wide: true, Description: "Images referenced by each container in the template."},
	Column{Name: "Selector", Wide: true, Description: "Label selector for pods."},
)

// DaemonSets prints NAME DESIRED CURRENT READY UP-TO-DATE AVAILABLE NODE SELECTOR AGE.
var DaemonSets = New(func(o runtime.Object) []any {
	ds := o.(*appsv1.DaemonSet)
	c, i := containersAndImages(ds.Spec.Template.Spec)
	return []any{int64(ds.Status.DesiredNumberScheduled), int64(ds.Status.CurrentNumberScheduled), int64(ds.Status.NumberReady),
		int64(ds.Status.UpdatedNumberScheduled), int64(ds.Status.NumberAvailable), none(labels.FormatLabels(ds.Spec.Template.Spec.NodeSelector)),
		Age(ds.CreationTimestamp), c, i, selector(ds.Spec.Selector)}
},
	Column{Name: "Desired", Type: "integer", Description: "Number of nodes that should run the daemon pod."},
	Column{Name: "Current", Type: "integer", Description: "Number of nodes running at least one daemon pod."},
	Column{Name: "Ready", Type: "integer", Description: "Number of nodes with a ready daemon pod."},
	Column{Name: "Up-to-date", Type: "integer", Description: "Number of nodes running the updated daemon pod."},
	Column{Name: "Available", Type: "integer", Description: "Number of nodes with an available daemon pod."},
	Column{Name: "Node Selector", Description: "Node selector of the pod template."},
	AgeColumn,
	Column{Name: "Containers", Wide: true, Description: "Names of each container in the template."},
	Column{Name: "Images", Wide: true, Description: "Images referenced by each container in the template."},
	Column{Name: "Selector", Wide: true, Description: "Label selector for pods."},
)

// EndpointSlices prints NAME ADDRESSTYPE PORTS ENDPOINTS AGE.
var EndpointSlices = New(func(o runtime.Object) []any {
	es := o.(*discoveryv1.EndpointSlice)
	var ports []string
	for _, p := range es.Ports {
		if p.Port != nil {
			ports = append(ports, strconv.Itoa(int(*p.Port)))
		}
	}
	var addrs []string
	for _, e := range es.Endpoints {
		addrs = append(addrs, e.Addresses...)
	}
	return []any{string(es.AddressType), firstN(ports, 3), firstN(addrs, 3), Age(es.CreationTimestamp)}
},
	Column{Name: "AddressType", Description: "Type of address carried by this EndpointSlice."},
	Column{Name: "Ports", Description: "Port numbers exposed by this EndpointSlice."},
	Column{Name: "Endpoints", Description: "Addresses of the endpoints."},
	AgeColumn,
)

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

// Leases prints NAME HOLDER AGE.
var Leases = New(func(o runtime.Object) []any {
	l := o.(*coordinationv1.Lease)
	holder := ""
	if l.Spec.HolderIdentity != nil {
		holder = *l.Spec.HolderIdentity
	}
	return []any{holder, Age(l.CreationTimestamp)}
},
	Column{Name: "Holder", Description: "The holder of the lease."},
	AgeColumn,
)

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

// EventsV1 prints events.k8s.io/v1 events with the same columns.
var EventsV1 = Custom(func(o runtime.Object) []any {
	e := o.(*eventsv1.Event)
	core := &corev1.Event{ObjectMeta: e.ObjectMeta, EventTime: e.EventTime, ReportingController: e.ReportingController,
		Reason: e.Reason, InvolvedObject: e.Regarding, Message: e.Note, Type: e.Type, Source: e.DeprecatedSource,
		FirstTimestamp: e.DeprecatedFirstTimestamp, LastTimestamp: e.DeprecatedLastTimestamp, Count: e.DeprecatedCount}
	if e.Series != nil {
		core.Series = &corev1.EventSeries{Count: e.Series.Count, LastObservedTime: e.Series.LastObservedTime}
	}
	return eventRow(core)
}, eventColumns...)

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

// ServiceCIDRs prints NAME CIDRS AGE.
var ServiceCIDRs = New(func(o runtime.Object) []any {
	sc := o.(*networkingv1.ServiceCIDR)
	return []any{strings.Join(sc.Spec.CIDRs, ","), Age(sc.CreationTimestamp)}
}, Column{Name: "CIDRs"}, AgeColumn)

// IPAddresses prints NAME PARENTREF AGE, the parent as resource.group/namespace/name
// ("services/default/kubernetes").
var IPAddresses = New(func(o runtime.Object) []any {
	ip := o.(*networkingv1.IPAddress)
	parent := "<none>"
	if r := ip.Spec.ParentRef; r != nil {
		parent = strings.ToLower(schema.GroupResource{Group: r.Group, Resource: r.Resource}.String())
		if r.Namespace != "" {
			parent += "/" + r.Namespace
		}
		parent += "/" + r.Name
	}
	return []any{parent, Age(ip.CreationTimestamp)}
}, Column{Name: "ParentRef"}, AgeColumn)

// NetworkPolicies prints NAME POD-SELECTOR AGE.
var NetworkPolicies = New(func(o runtime.Object) []any {
	np := o.(*networkingv1.NetworkPolicy)
	return []any{selector(&np.Spec.PodSelector), Age(np.CreationTimestamp)}
}, Column{Name: "Pod-Selector"}, AgeColumn)

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
