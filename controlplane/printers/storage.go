package printers

import (
	"fmt"
	storagemigrationv1 "k8s.io/api/storagemigration/v1"
	"sort"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	networkingv1 "k8s.io/api/networking/v1"
	nodev1 "k8s.io/api/node/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// StatefulSets prints NAME READY AGE, wide: CONTAINERS IMAGES.
var StatefulSets = New(func(o runtime.Object) []any {
	ss := o.(*appsv1.StatefulSet)
	want := int32(0)
	if ss.Spec.Replicas != nil {
		want = *ss.Spec.Replicas
	}
	c, i := containersAndImages(ss.Spec.Template.Spec)
	return []any{fmt.Sprintf("%d/%d", ss.Status.ReadyReplicas, want), Age(ss.CreationTimestamp), c, i}
},
	Column{Name: "Ready", Description: "Number of the pod with ready state"},
	AgeColumn,
	Column{Name: "Containers", Wide: true, Description: "Names of each container in the template."},
	Column{Name: "Images", Wide: true, Description: "Images referenced by each container in the template."},
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

// IsDefaultClassAnnotation marks the default StorageClass (and IngressClass).
const IsDefaultClassAnnotation = "storageclass.kubernetes.io/is-default-class"

// StorageClasses prints NAME PROVISIONER RECLAIMPOLICY VOLUMEBINDINGMODE
// ALLOWVOLUMEEXPANSION AGE; the default class's name says "(default)".
var StorageClasses = Custom(func(o runtime.Object) []any {
	sc := o.(*storagev1.StorageClass)
	name := sc.Name
	if sc.Annotations[IsDefaultClassAnnotation] == "true" || sc.Annotations["storageclass.beta.kubernetes.io/is-default-class"] == "true" {
		name += " (default)"
	}
	reclaim, mode := string(corev1.PersistentVolumeReclaimDelete), string(storagev1.VolumeBindingImmediate)
	if sc.ReclaimPolicy != nil {
		reclaim = string(*sc.ReclaimPolicy)
	}
	if sc.VolumeBindingMode != nil {
		mode = string(*sc.VolumeBindingMode)
	}
	expand := sc.AllowVolumeExpansion != nil && *sc.AllowVolumeExpansion
	return []any{name, sc.Provisioner, reclaim, mode, expand, Age(sc.CreationTimestamp)}
},
	Column{Name: "Name", Format: "name"}, Column{Name: "Provisioner"}, Column{Name: "ReclaimPolicy"},
	Column{Name: "VolumeBindingMode"}, Column{Name: "AllowVolumeExpansion", Type: "boolean"}, AgeColumn,
)

func boolOr(b *bool, def bool) bool {
	if b == nil {
		return def
	}
	return *b
}

// CSIDrivers prints NAME ATTACHREQUIRED PODINFOONMOUNT STORAGECAPACITY TOKENREQUESTS
// REQUIRESREPUBLISH MODES AGE.
var CSIDrivers = New(func(o runtime.Object) []any {
	d := o.(*storagev1.CSIDriver)
	var modes []string
	for _, m := range d.Spec.VolumeLifecycleModes {
		modes = append(modes, string(m))
	}
	var aud []string
	for _, t := range d.Spec.TokenRequests {
		aud = append(aud, t.Audience)
	}
	tokens := "<unset>"
	if len(aud) > 0 {
		tokens = strings.Join(aud, ",")
	}
	return []any{boolOr(d.Spec.AttachRequired, true), boolOr(d.Spec.PodInfoOnMount, false), boolOr(d.Spec.StorageCapacity, false),
		tokens, boolOr(d.Spec.RequiresRepublish, false), strings.Join(modes, ","), Age(d.CreationTimestamp)}
},
	Column{Name: "AttachRequired", Type: "boolean"}, Column{Name: "PodInfoOnMount", Type: "boolean"},
	Column{Name: "StorageCapacity", Type: "boolean"}, Column{Name: "TokenRequests"},
	Column{Name: "RequiresRepublish", Type: "boolean"}, Column{Name: "Modes"}, AgeColumn,
)

// CSINodes prints NAME DRIVERS AGE.
var CSINodes = New(func(o runtime.Object) []any {
	n := o.(*storagev1.CSINode)
	return []any{int64(len(n.Spec.Drivers)), Age(n.CreationTimestamp)}
}, Column{Name: "Drivers", Type: "integer"}, AgeColumn)

// CSIStorageCapacities prints NAME STORAGECLASSNAME CAPACITY.
var CSIStorageCapacities = New(func(o runtime.Object) []any {
	c := o.(*storagev1.CSIStorageCapacity)
	capacity := "<unset>"
	if c.Capacity != nil {
		capacity = c.Capacity.String()
	}
	return []any{c.StorageClassName, capacity}
}, Column{Name: "StorageClassName"}, Column{Name: "Capacity"})

// VolumeAttachments prints NAME ATTACHER PV NODE ATTACHED AGE.
var VolumeAttachments = New(func(o runtime.Object) []any {
	va := o.(*storagev1.VolumeAttachment)
	pv := ""
	if va.Spec.Source.PersistentVolumeName != nil {
		pv = *va.Spec.Source.PersistentVolumeName
	}
	return []any{va.Spec.Attacher, pv, va.Spec.NodeName, va.Status.Attached, Age(va.CreationTimestamp)}
}, Column{Name: "Attacher"}, Column{Name: "PV"}, Column{Name: "Node"}, Column{Name: "Attached", Type: "boolean"}, AgeColumn)

// VolumeAttributesClasses prints NAME DRIVERNAME AGE.
var VolumeAttributesClasses = New(func(o runtime.Object) []any {
	c := o.(*storagev1.VolumeAttributesClass)
	return []any{c.DriverName, Age(c.CreationTimestamp)}
}, Column{Name: "DriverName"}, AgeColumn)

// RuntimeClasses prints NAME HANDLER AGE.
var RuntimeClasses = New(func(o runtime.Object) []any {
	rc := o.(*nodev1.RuntimeClass)
	return []any{rc.Handler, Age(rc.CreationTimestamp)}
}, Column{Name: "Handler"}, AgeColumn)

// PriorityClasses prints NAME VALUE GLOBAL-DEFAULT AGE PREEMPTIONPOLICY.
var PriorityClasses = New(func(o runtime.Object) []any {
	pc := o.(*schedulingv1.PriorityClass)
	policy := "<unset>"
	if pc.PreemptionPolicy != nil {
		policy = string(*pc.PreemptionPolicy)
	}
	return []any{int64(pc.Value), pc.GlobalDefault, Age(pc.CreationTimestamp), policy}
}, Column{Name: "Value", Type: "integer"}, Column{Name: "Global-Default", Type: "boolean"}, AgeColumn, Column{Name: "PreemptionPolicy"})

// Ingresses prints NAME CLASS HOSTS ADDRESS PORTS AGE.
var Ingresses = New(func(o runtime.Object) []any {
	ing := o.(*networkingv1.Ingress)
	class := "<none>"
	if ing.Spec.IngressClassName != nil {
		class = *ing.Spec.IngressClassName
	}
	var hosts []string
	for _, r := range ing.Spec.Rules {
		if r.Host != "" {
			hosts = append(hosts, r.Host)
		}
	}
	h := "*"
	if len(hosts) > 0 {
		h = strings.Join(hosts, ",")
	}
	var addrs []string
	for _, lb := range ing.Status.LoadBalancer.Ingress {
		if lb.IP != "" {
			addrs = append(addrs, lb.IP)
		} else if lb.Hostname != "" {
			addrs = append(addrs, lb.Hostname)
		}
	}
	ports := "80"
	if len(ing.Spec.TLS) > 0 {
		ports = "80, 443"
	}
	return []any{class, h, strings.Join(addrs, ","), ports, Age(ing.CreationTimestamp)}
}, Column{Name: "Class"}, Column{Name: "Hosts"}, Column{Name: "Address"}, Column{Name: "Ports"}, AgeColumn)

// IngressClasses prints NAME CONTROLLER PARAMETERS AGE.
var IngressClasses = New(func(o runtime.Object) []any {
	ic := o.(*networkingv1.IngressClass)
	params := "<none>"
	if p := ic.Spec.Parameters; p != nil {
		params = p.Kind + "/" + p.Name
		if p.APIGroup != nil && *p.APIGroup != "" {
			params = p.Kind + "." + *p.APIGroup + "/" + p.Name
		}
	}
	return []any{ic.Spec.Controller, params, Age(ic.CreationTimestamp)}
}, Column{Name: "Controller"}, Column{Name: "Parameters"}, AgeColumn)

// DeviceClasses prints NAME AGE.
var DeviceClasses = New(func(o runtime.Object) []any {
	return []any{Age(o.(*resourcev1.DeviceClass).CreationTimestamp)}
}, AgeColumn)

// ResourceClaims prints NAME STATE AGE.
var ResourceClaims = New(func(o runtime.Object) []any {
	c := o.(*resourcev1.ResourceClaim)
	var state []string
	if c.Status.Allocation != nil {
		state = append(state, "allocated")
		if len(c.Status.ReservedFor) > 0 {
			state = append(state, "reserved")
		}
	} else {
		state = append(state, "pending")
	}
	if c.DeletionTimestamp != nil {
		state = append(state, "deleted")
	}
	sort.Strings(state[1:])
	return []any{strings.Join(state, ","), Age(c.CreationTimestamp)}
}, Column{Name: "State"}, AgeColumn)

// ResourceClaimTemplates prints NAME AGE.
var ResourceClaimTemplates = New(func(o runtime.Object) []any {
	return []any{Age(o.(*resourcev1.ResourceClaimTemplate).CreationTimestamp)}
}, AgeColumn)

// ResourceSlices prints NAME NODE DRIVER POOL AGE.
var ResourceSlices = New(func(o runtime.Object) []any {
	s := o.(*resourcev1.ResourceSlice)
	node := "<none>"
	if s.Spec.NodeName != nil {
		node = *s.Spec.NodeName
	}
	return []any{node, s.Spec.Driver, s.Spec.Pool.Name, Age(s.CreationTimestamp)}
}, Column{Name: "Node"}, Column{Name: "Driver"}, Column{Name: "Pool"}, AgeColumn)

// DeviceTaintRules prints NAME EFFECT AGE.
var DeviceTaintRules = New(func(o runtime.Object) []any {
	r := o.(*resourcev1.DeviceTaintRule)
	return []any{string(r.Spec.Taint.Effect), Age(r.CreationTimestamp)}
}, Column{Name: "Effect"}, AgeColumn)

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

// HorizontalPodAutoscalers prints NAME REFERENCE TARGETS MINPODS MAXPODS REPLICAS AGE.
var HorizontalPodAutoscalers = New(func(o runtime.Object) []any {
	h := o.(*autoscalingv2.HorizontalPodAutoscaler)
	ref := h.Spec.ScaleTargetRef.Kind + "/" + h.Spec.ScaleTargetRef.Name
	var targets []string
	for i, m := range h.Spec.Metrics {
		if m.Type != autoscalingv2.ResourceMetricSourceType || m.Resource == nil {
			targets = append(targets, "<unknown>")
			continue
		}
		cur := "<unknown>"
		if i < len(h.Status.CurrentMetrics) {
			if c := h.Status.CurrentMetrics[i].Resource; c != nil && c.Current.AverageUtilization != nil {
				cur = fmt.Sprintf("%d%%", *c.Current.AverageUtilization)
			}
		}
		want := "<auto>"
		if t := m.Resource.Target; t.AverageUtilization != nil {
			want = fmt.Sprintf("%d%%", *t.AverageUtilization)
		} else if t.AverageValue != nil {
			want = t.AverageValue.String()
		}
		targets = append(targets, fmt.Sprintf("%s: %s/%s", m.Resource.Name, cur, want))
	}
	minPods := "<unset>"
	if h.Spec.MinReplicas != nil {
		minPods = fmt.Sprint(*h.Spec.MinReplicas)
	}
	return []any{ref, strings.Join(targets, ", "), minPods, int64(h.Spec.MaxReplicas), int64(h.Status.CurrentReplicas), Age(h.CreationTimestamp)}
}, Column{Name: "Reference"}, Column{Name: "Targets"}, Column{Name: "MinPods"}, Column{Name: "MaxPods", Type: "integer"},
	Column{Name: "Replicas", Type: "integer"}, AgeColumn)

// FlowSchemas prints NAME PRIORITYLEVEL MATCHINGPRECEDENCE DISTINGUISHERMETHOD AGE MISSINGPL.
var FlowSchemas = New(func(o runtime.Object) []any {
	fs := o.(*flowcontrolv1.FlowSchema)
	d := "<none>"
	if fs.Spec.DistinguisherMethod != nil {
		d = string(fs.Spec.DistinguisherMethod.Type)
	}
	missing := "?"
	for _, c := range fs.Status.Conditions {
		if c.Type == flowcontrolv1.FlowSchemaConditionDangling {
			missing = string(c.Status)
		}
	}
	return []any{fs.Spec.PriorityLevelConfiguration.Name, int64(fs.Spec.MatchingPrecedence), d, Age(fs.CreationTimestamp), missing}
}, Column{Name: "PriorityLevel"}, Column{Name: "MatchingPrecedence", Type: "integer"}, Column{Name: "DistinguisherMethod"}, AgeColumn, Column{Name: "MissingPL"})

// PriorityLevelConfigurations prints NAME TYPE NOMINALCONCURRENCYSHARES QUEUES HANDSIZE
// QUEUELENGTHLIMIT AGE.
var PriorityLevelConfigurations = New(func(o runtime.Object) []any {
	plc := o.(*flowcontrolv1.PriorityLevelConfiguration)
	shares, queues, hand, limit := "<none>", "<none>", "<none>", "<none>"
	if l := plc.Spec.Limited; l != nil {
		if l.NominalConcurrencyShares != nil {
			shares = fmt.Sprint(*l.NominalConcurrencyShares)
		}
		if q := l.LimitResponse.Queuing; q != nil {
			queues, hand, limit = fmt.Sprint(q.Queues), fmt.Sprint(q.HandSize), fmt.Sprint(q.QueueLengthLimit)
		}
	}
	return []any{string(plc.Spec.Type), shares, queues, hand, limit, Age(plc.CreationTimestamp)}
}, Column{Name: "Type"}, Column{Name: "NominalConcurrencyShares"}, Column{Name: "Queues"}, Column{Name: "HandSize"}, Column{Name: "QueueLengthLimit"}, AgeColumn)

// ValidatingWebhookConfigurations prints NAME WEBHOOKS AGE.
var ValidatingWebhookConfigurations = New(func(o runtime.Object) []any {
	c := o.(*admissionregistrationv1.ValidatingWebhookConfiguration)
	return []any{int64(len(c.Webhooks)), Age(c.CreationTimestamp)}
}, Column{Name: "Webhooks", Type: "integer"}, AgeColumn)

// MutatingWebhookConfigurations prints NAME WEBHOOKS AGE.
var MutatingWebhookConfigurations = New(func(o runtime.Object) []any {
	c := o.(*admissionregistrationv1.MutatingWebhookConfiguration)
	return []any{int64(len(c.Webhooks)), Age(c.CreationTimestamp)}
}, Column{Name: "Webhooks", Type: "integer"}, AgeColumn)

// ValidatingAdmissionPolicies prints NAME VALIDATIONS PARAMKIND AGE.
var ValidatingAdmissionPolicies = New(func(o runtime.Object) []any {
	p := o.(*admissionregistrationv1.ValidatingAdmissionPolicy)
	param := "<unset>"
	if k := p.Spec.ParamKind; k != nil {
		param = k.APIVersion + "/" + k.Kind
	}
	return []any{int64(len(p.Spec.Validations)), param, Age(p.CreationTimestamp)}
}, Column{Name: "Validations", Type: "integer"}, Column{Name: "ParamKind"}, AgeColumn)

// ValidatingAdmissionPolicyBindings prints NAME POLICYNAME PARAMREF AGE.
var ValidatingAdmissionPolicyBindings = New(func(o runtime.Object) []any {
	b := o.(*admissionregistrationv1.ValidatingAdmissionPolicyBinding)
	ref := "<unset>"
	if r := b.Spec.ParamRef; r != nil && r.Name != "" {
		ref = r.Namespace + "/" + r.Name
	}
	return []any{b.Spec.PolicyName, ref, Age(b.CreationTimestamp)}
}, Column{Name: "PolicyName"}, Column{Name: "ParamRef"}, AgeColumn)

// MutatingAdmissionPolicies prints NAME MUTATIONS PARAMKIND AGE.
var MutatingAdmissionPolicies = New(func(o runtime.Object) []any {
	p := o.(*admissionregistrationv1.MutatingAdmissionPolicy)
	param := "<unset>"
	if k := p.Spec.ParamKind; k != nil {
		param = k.APIVersion + "/" + k.Kind
	}
	return []any{int64(len(p.Spec.Mutations)), param, Age(p.CreationTimestamp)}
}, Column{Name: "Mutations", Type: "integer"}, Column{Name: "ParamKind"}, AgeColumn)

// MutatingAdmissionPolicyBindings prints NAME POLICYNAME PARAMREF AGE.
var MutatingAdmissionPolicyBindings = New(func(o runtime.Object) []any {
	b := o.(*admissionregistrationv1.MutatingAdmissionPolicyBinding)
	ref := "<unset>"
	if r := b.Spec.ParamRef; r != nil && r.Name != "" {
		ref = r.Namespace + "/" + r.Name
	}
	return []any{b.Spec.PolicyName, ref, Age(b.CreationTimestamp)}
}, Column{Name: "PolicyName"}, Column{Name: "ParamRef"}, AgeColumn)

// StorageVersionMigrations prints NAME RESOURCE AGE.
var StorageVersionMigrations = New(func(o runtime.Object) []any {
	m := o.(*storagemigrationv1.StorageVersionMigration)
	return []any{m.Spec.Resource.String(), Age(m.CreationTimestamp)}
}, Column{Name: "Resource"}, AgeColumn)
