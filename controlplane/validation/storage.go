package validation

import (
	"fmt"
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var (
	accessModes = []string{string(corev1.ReadOnlyMany), string(corev1.ReadWriteMany), string(corev1.ReadWriteOnce), string(corev1.ReadWriteOncePod)}
	volumeModes = []string{string(corev1.PersistentVolumeBlock), string(corev1.PersistentVolumeFilesystem)}
)

func volumeAccessModes(modes []corev1.PersistentVolumeAccessMode, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(modes) == 0 {
		return field.ErrorList{field.Required(fld, "at least 1 access mode is required")}
	}
	seen := sets.New[corev1.PersistentVolumeAccessMode]()
	for _, m := range modes {
		if !contains(accessModes, string(m)) {
			errs = append(errs, field.NotSupported(fld, m, accessModes))
		}
		seen.Insert(m)
	}
	if seen.Has(corev1.ReadWriteOncePod) && seen.Len() > 1 {
		errs = append(errs, field.Forbidden(fld, "may not use ReadWriteOncePod with other access modes"))
	}
	return errs
}

func volumeMode(m *corev1.PersistentVolumeMode, fld *field.Path) field.ErrorList {
	if m != nil && !contains(volumeModes, string(*m)) {
		return field.ErrorList{field.NotSupported(fld, *m, volumeModes)}
	}
	return nil
}

// pvcSpec validates a claim's spec, for claims and StatefulSet claim templates.
func pvcSpec(s *corev1.PersistentVolumeClaimSpec, fld *field.Path) field.ErrorList {
	errs := volumeAccessModes(s.AccessModes, fld.Child("accessModes"))
	if s.Selector != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(s.Selector, metav1validation.LabelSelectorValidationOptions{}, fld.Child("selector"))...)
	}
	storage := fld.Child("resources", "requests").Key(string(corev1.ResourceStorage))
	if q, ok := s.Resources.Requests[corev1.ResourceStorage]; !ok {
		// Upstream names the path without "requests" here.
		errs = append(errs, field.Required(fld.Child("resources").Key(string(corev1.ResourceStorage)), ""))
	} else if q.Sign() <= 0 {
		errs = append(errs, field.Invalid(storage, q.String(), "must be greater than zero"))
	}
	if s.StorageClassName != nil && *s.StorageClassName != "" {
		for _, msg := range validation.IsDNS1123Subdomain(*s.StorageClassName) {
			errs = append(errs, field.Invalid(fld.Child("storageClassName"), *s.StorageClassName, msg))
		}
	}
	return append(errs, volumeMode(s.VolumeMode, fld.Child("volumeMode"))...)
}

// PersistentVolumeClaim validates a claim.
func PersistentVolumeClaim(c *corev1.PersistentVolumeClaim) field.ErrorList {
	errs := ObjectMeta(&c.ObjectMeta, true, DNSSubdomain)
	return append(errs, pvcSpec(&c.Spec, specPath)...)
}

// PersistentVolumeClaimUpdate keeps a claim's spec immutable but for what upstream lets
// change: the binder setting volumeName once, and a bound claim's storage request growing.
func PersistentVolumeClaimUpdate(c, old *corev1.PersistentVolumeClaim) field.ErrorList {
	errs := ObjectMetaUpdate(&c.ObjectMeta, &old.ObjectMeta)
	a, b := c.Spec.DeepCopy(), old.Spec.DeepCopy()
	if b.VolumeName == "" {
		a.VolumeName = ""
	}
	a.Resources.Requests, b.Resources.Requests = nil, nil
	a.VolumeAttributesClassName, b.VolumeAttributesClassName = nil, nil
	if !apiequality.Semantic.DeepEqual(a, b) {
		errs = append(errs, field.Forbidden(specPath, "spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims"))
	}
	n, o := c.Spec.Resources.Requests[corev1.ResourceStorage], old.Spec.Resources.Requests[corev1.ResourceStorage]
	if n.Cmp(o) != 0 {
		fld := specPath.Child("resources", "requests").Key(string(corev1.ResourceStorage))
		switch {
		case old.Status.Phase != corev1.ClaimBound:
			errs = append(errs, field.Forbidden(fld, "spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims"))
		case n.Cmp(o) < 0:
			errs = append(errs, field.Forbidden(fld, "field can not be less than previous value"))
		}
	}
	return errs
}

// persistentVolumeSource returns the names of the volume sources a PV sets.
func persistentVolumeSources(s *corev1.PersistentVolumeSource) []string {
	var out []string
	for name, set := range map[string]bool{
		"hostPath": s.HostPath != nil, "local": s.Local != nil, "nfs": s.NFS != nil, "csi": s.CSI != nil,
		"iscsi": s.ISCSI != nil, "fc": s.FC != nil, "rbd": s.RBD != nil, "cephfs": s.CephFS != nil,
		"gcePersistentDisk": s.GCEPersistentDisk != nil, "awsElasticBlockStore": s.AWSElasticBlockStore != nil,
		"azureDisk": s.AzureDisk != nil, "azureFile": s.AzureFile != nil, "glusterfs": s.Glusterfs != nil,
		"cinder": s.Cinder != nil, "flexVolume": s.FlexVolume != nil, "flocker": s.Flocker != nil,
		"vsphereVolume": s.VsphereVolume != nil, "quobyte": s.Quobyte != nil, "photonPersistentDisk": s.PhotonPersistentDisk != nil,
		"portworxVolume": s.PortworxVolume != nil, "scaleIO": s.ScaleIO != nil, "storageos": s.StorageOS != nil,
	} {
		if set {
			out = append(out, name)
		}
	}
	return out
}

var reclaimPolicies = []string{string(corev1.PersistentVolumeReclaimDelete), string(corev1.PersistentVolumeReclaimRecycle), string(corev1.PersistentVolumeReclaimRetain)}

// PersistentVolume validates a PV with upstream's messages.
func PersistentVolume(pv *corev1.PersistentVolume) field.ErrorList {
	errs := ObjectMeta(&pv.ObjectMeta, false, DNSSubdomain)
	s := &pv.Spec
	errs = append(errs, volumeAccessModes(s.AccessModes, specPath.Child("accessModes"))...)
	cp := specPath.Child("capacity")
	if len(s.Capacity) == 0 {
		errs = append(errs, field.Required(cp, ""))
	}
	for k, q := range s.Capacity {
		if k != corev1.ResourceStorage {
			errs = append(errs, field.NotSupported(cp, k, []string{string(corev1.ResourceStorage)}))
			continue
		}
		if q.Sign() <= 0 {
			errs = append(errs, field.Invalid(cp.Key(string(k)), q.String(), "must be greater than zero"))
		}
	}
	if p := s.PersistentVolumeReclaimPolicy; p != "" && !contains(reclaimPolicies, string(p)) {
		errs = append(errs, field.NotSupported(specPath.Child("persistentVolumeReclaimPolicy"), p, reclaimPolicies))
	}
	errs = append(errs, volumeMode(s.VolumeMode, specPath.Child("volumeMode"))...)
	switch src := persistentVolumeSources(&s.PersistentVolumeSource); len(src) {
	case 0:
		errs = append(errs, field.Required(specPath, "must specify a volume type"))
	case 1:
	default:
		errs = append(errs, field.Forbidden(specPath.Child(src[1]), "may not specify more than 1 volume type"))
	}
	if hp := s.HostPath; hp != nil {
		errs = append(errs, absolutePath(hp.Path, specPath.Child("hostPath", "path"))...)
	}
	if l := s.Local; l != nil {
		errs = append(errs, absolutePath(l.Path, specPath.Child("local", "path"))...)
		if s.NodeAffinity == nil || s.NodeAffinity.Required == nil {
			errs = append(errs, field.Required(specPath.Child("nodeAffinity"), "Local volume requires node affinity"))
		}
	}
	if c := s.CSI; c != nil {
		if c.Driver == "" {
			errs = append(errs, field.Required(specPath.Child("csi", "driver"), ""))
		}
		if c.VolumeHandle == "" {
			errs = append(errs, field.Required(specPath.Child("csi", "volumeHandle"), ""))
		}
	}
	if na := s.NodeAffinity; na != nil && na.Required != nil && len(na.Required.NodeSelectorTerms) == 0 {
		errs = append(errs, field.Required(specPath.Child("nodeAffinity", "required", "nodeSelectorTerms"), "must have at least one node selector term"))
	}
	if s.StorageClassName != "" {
		for _, msg := range validation.IsDNS1123Subdomain(s.StorageClassName) {
			errs = append(errs, field.Invalid(specPath.Child("storageClassName"), s.StorageClassName, msg))
		}
	}
	return errs
}

// PersistentVolumeUpdate keeps a PV's volume source, and its node affinity once set,
// immutable.
func PersistentVolumeUpdate(pv, old *corev1.PersistentVolume) field.ErrorList {
	errs := ObjectMetaUpdate(&pv.ObjectMeta, &old.ObjectMeta)
	if !apiequality.Semantic.DeepEqual(pv.Spec.PersistentVolumeSource, old.Spec.PersistentVolumeSource) {
		errs = append(errs, field.Forbidden(specPath.Child("persistentvolumesource"), "spec.persistentvolumesource is immutable after creation"))
	}
	if old.Spec.NodeAffinity != nil && !apiequality.Semantic.DeepEqual(pv.Spec.NodeAffinity, old.Spec.NodeAffinity) {
		errs = append(errs, field.Invalid(specPath.Child("nodeAffinity"), pv.Spec.NodeAffinity, "field is immutable"))
	}
	if pv.Spec.VolumeMode != nil && old.Spec.VolumeMode != nil && *pv.Spec.VolumeMode != *old.Spec.VolumeMode {
		errs = append(errs, field.Invalid(specPath.Child("volumeMode"), *pv.Spec.VolumeMode, "field is immutable"))
	}
	return errs
}

func absolutePath(p string, fld *field.Path) field.ErrorList {
	switch {
	case p == "":
		return field.ErrorList{field.Required(fld, "")}
	case !path.IsAbs(p):
		return field.ErrorList{field.Invalid(fld, p, "must be an absolute path")}
	case strings.Contains(p, ".."):
		for _, part := range strings.Split(p, "/") {
			if part == ".." {
				return field.ErrorList{field.Invalid(fld, p, "must not contain '..'")}
			}
		}
	}
	return nil
}

var (
	classReclaimPolicies = []string{string(corev1.PersistentVolumeReclaimDelete), string(corev1.PersistentVolumeReclaimRetain)}
	bindingModes         = []string{string(storagev1.VolumeBindingImmediate), string(storagev1.VolumeBindingWaitForFirstConsumer)}
)

// qualifiedProvisioner is upstream's rule for provisioner and driver names.
func qualifiedProvisioner(name string, fld *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(fld, "")}
	}
	var errs field.ErrorList
	if len(name) > 63 {
		errs = append(errs, field.TooLong(fld, name, 63))
	}
	for _, msg := range validation.IsQualifiedName(strings.ToLower(name)) {
		errs = append(errs, field.Invalid(fld, name, msg))
	}
	return errs
}

// StorageClass validates a StorageClass.
func StorageClass(sc *storagev1.StorageClass) field.ErrorList {
	errs := ObjectMeta(&sc.ObjectMeta, false, DNSSubdomain)
	errs = append(errs, qualifiedProvisioner(sc.Provisioner, field.NewPath("provisioner"))...)
	if p := sc.ReclaimPolicy; p != nil && !contains(classReclaimPolicies, string(*p)) {
		errs = append(errs, field.NotSupported(field.NewPath("reclaimPolicy"), *p, classReclaimPolicies))
	}
	if m := sc.VolumeBindingMode; m == nil {
		errs = append(errs, field.Required(field.NewPath("volumeBindingMode"), ""))
	} else if !contains(bindingModes, string(*m)) {
		errs = append(errs, field.NotSupported(field.NewPath("volumeBindingMode"), *m, bindingModes))
	}
	for k := range sc.Parameters {
		if k == "" {
			errs = append(errs, field.Invalid(field.NewPath("parameters"), k, "key may not be empty"))
		}
	}
	return errs
}

// StorageClassUpdate keeps upstream's immutable fields.
func StorageClassUpdate(sc, old *storagev1.StorageClass) field.ErrorList {
	errs := ObjectMetaUpdate(&sc.ObjectMeta, &old.ObjectMeta)
	if !apiequality.Semantic.DeepEqual(sc.Parameters, old.Parameters) {
		errs = append(errs, field.Forbidden(field.NewPath("parameters"), "updates to parameters are forbidden."))
	}
	if sc.Provisioner != old.Provisioner {
		errs = append(errs, field.Forbidden(field.NewPath("provisioner"), "updates to provisioner are forbidden."))
	}
	if !apiequality.Semantic.DeepEqual(sc.ReclaimPolicy, old.ReclaimPolicy) {
		errs = append(errs, field.Forbidden(field.NewPath("reclaimPolicy"), "updates to reclaimPolicy are forbidden."))
	}
	if !apiequality.Semantic.DeepEqual(sc.VolumeBindingMode, old.VolumeBindingMode) {
		errs = append(errs, field.Invalid(field.NewPath("volumeBindingMode"), sc.VolumeBindingMode, "field is immutable"))
	}
	return errs
}

// CSIDriver validates a CSIDriver: its name is the driver's.
func CSIDriver(d *storagev1.CSIDriver) field.ErrorList {
	errs := ObjectMeta(&d.ObjectMeta, false, func(name string, _ bool) []string {
		var out []string
		for _, e := range qualifiedProvisioner(name, field.NewPath("name")) {
			out = append(out, e.Detail)
		}
		return out
	})
	for i, m := range d.Spec.VolumeLifecycleModes {
		if m != storagev1.VolumeLifecyclePersistent && m != storagev1.VolumeLifecycleEphemeral {
			errs = append(errs, field.NotSupported(specPath.Child("volumeLifecycleModes").Index(i), m,
				[]string{string(storagev1.VolumeLifecyclePersistent), string(storagev1.VolumeLifecycleEphemeral)}))
		}
	}
	return errs
}

// CSINode validates a CSINode: one entry per driver, each with a node ID.
func CSINode(n *storagev1.CSINode) field.ErrorList {
	errs := ObjectMeta(&n.ObjectMeta, false, DNSSubdomain)
	seen := sets.New[string]()
	for i, d := range n.Spec.Drivers {
		fld := specPath.Child("drivers").Index(i)
		errs = append(errs, qualifiedProvisioner(d.Name, fld.Child("name"))...)
		if seen.Has(d.Name) {
			errs = append(errs, field.Duplicate(fld.Child("name"), d.Name))
		}
		seen.Insert(d.Name)
		if d.NodeID == "" {
			errs = append(errs, field.Required(fld.Child("nodeID"), ""))
		}
	}
	return errs
}

// CSIStorageCapacity validates a CSIStorageCapacity.
func CSIStorageCapacity(c *storagev1.CSIStorageCapacity) field.ErrorList {
	errs := ObjectMeta(&c.ObjectMeta, true, DNSSubdomain)
	if c.StorageClassName == "" {
		errs = append(errs, field.Required(field.NewPath("storageClassName"), ""))
	}
	for _, msg := range validation.IsDNS1123Subdomain(c.StorageClassName) {
		if c.StorageClassName != "" {
			errs = append(errs, field.Invalid(field.NewPath("storageClassName"), c.StorageClassName, msg))
		}
	}
	if c.Capacity != nil && c.Capacity.Sign() < 0 {
		errs = append(errs, field.Invalid(field.NewPath("capacity"), c.Capacity.String(), "must be greater than or equal to 0"))
	}
	return errs
}

// VolumeAttachment validates a VolumeAttachment: an attacher, a node and exactly one source.
func VolumeAttachment(va *storagev1.VolumeAttachment) field.ErrorList {
	errs := ObjectMeta(&va.ObjectMeta, false, DNSSubdomain)
	errs = append(errs, qualifiedProvisioner(va.Spec.Attacher, specPath.Child("attacher"))...)
	if va.Spec.NodeName == "" {
		errs = append(errs, field.Required(specPath.Child("nodeName"), ""))
	}
	src := va.Spec.Source
	switch {
	case src.PersistentVolumeName == nil && src.InlineVolumeSpec == nil:
		errs = append(errs, field.Required(specPath.Child("source"), "must specify exactly one of inlineVolumeSpec and persistentVolumeName"))
	case src.PersistentVolumeName != nil && src.InlineVolumeSpec != nil:
		errs = append(errs, field.Forbidden(specPath.Child("source"), "must specify exactly one of inlineVolumeSpec and persistentVolumeName"))
	case src.PersistentVolumeName != nil && *src.PersistentVolumeName == "":
		errs = append(errs, field.Required(specPath.Child("source", "persistentVolumeName"), "must specify non empty persistentVolumeName"))
	}
	return errs
}

// VolumeAttachmentUpdate keeps the spec immutable.
func VolumeAttachmentUpdate(va, old *storagev1.VolumeAttachment) field.ErrorList {
	errs := ObjectMetaUpdate(&va.ObjectMeta, &old.ObjectMeta)
	if !apiequality.Semantic.DeepEqual(va.Spec, old.Spec) {
		errs = append(errs, field.Invalid(specPath, va.Spec, "field is immutable"))
	}
	return errs
}

// VolumeAttributesClass validates a VolumeAttributesClass.
func VolumeAttributesClass(c *storagev1.VolumeAttributesClass) field.ErrorList {
	errs := ObjectMeta(&c.ObjectMeta, false, DNSSubdomain)
	errs = append(errs, qualifiedProvisioner(c.DriverName, field.NewPath("driverName"))...)
	for k := range c.Parameters {
		if k == "" {
			errs = append(errs, field.Invalid(field.NewPath("parameters"), k, "key may not be empty"))
		}
	}
	return errs
}

// VolumeAttributesClassUpdate keeps the driver and parameters immutable.
func VolumeAttributesClassUpdate(c, old *storagev1.VolumeAttributesClass) field.ErrorList {
	errs := ObjectMetaUpdate(&c.ObjectMeta, &old.ObjectMeta)
	if c.DriverName != old.DriverName {
		errs = append(errs, field.Invalid(field.NewPath("driverName"), c.DriverName, "field is immutable"))
	}
	if !apiequality.Semantic.DeepEqual(c.Parameters, old.Parameters) {
		errs = append(errs, field.Invalid(field.NewPath("parameters"), c.Parameters, "field is immutable"))
	}
	return errs
}

var limitTypes = []string{string(corev1.LimitTypePod), string(corev1.LimitTypeContainer), string(corev1.LimitTypePersistentVolumeClaim)}

// LimitRange validates a LimitRange: known types, and per resource min <= default request
// <= default <= max.
func LimitRange(lr *corev1.LimitRange) field.ErrorList {
	errs := ObjectMeta(&lr.ObjectMeta, true, DNSSubdomain)
	for i, item := range lr.Spec.Limits {
		fld := specPath.Child("limits").Index(i)
		if !contains(limitTypes, string(item.Type)) {
			errs = append(errs, field.NotSupported(fld.Child("type"), item.Type, limitTypes))
		}
		for k, minQ := range item.Min {
			if maxQ, ok := item.Max[k]; ok && minQ.Cmp(maxQ) > 0 {
				errs = append(errs, field.Invalid(fld.Child("min").Key(string(k)), minQ.String(), fmt.Sprintf("min value %s is greater than max value %s", minQ.String(), maxQ.String())))
			}
		}
		for k, def := range item.Default {
			if maxQ, ok := item.Max[k]; ok && def.Cmp(maxQ) > 0 {
				errs = append(errs, field.Invalid(fld.Child("default").Key(string(k)), def.String(), fmt.Sprintf("default value %s is greater than max value %s", def.String(), maxQ.String())))
			}
			if minQ, ok := item.Min[k]; ok && minQ.Cmp(def) > 0 {
				errs = append(errs, field.Invalid(fld.Child("default").Key(string(k)), def.String(), fmt.Sprintf("min value %s is greater than default value %s", minQ.String(), def.String())))
			}
		}
		for k, q := range item.DefaultRequest {
			if def, ok := item.Default[k]; ok && q.Cmp(def) > 0 {
				errs = append(errs, field.Invalid(fld.Child("defaultRequest").Key(string(k)), q.String(), fmt.Sprintf("default request value %s is greater than default limit value %s", q.String(), def.String())))
			}
		}
	}
	return errs
}

// ResourceQuota validates a ResourceQuota: non-negative hard limits.
func ResourceQuota(q *corev1.ResourceQuota) field.ErrorList {
	errs := ObjectMeta(&q.ObjectMeta, true, DNSSubdomain)
	for k, v := range q.Spec.Hard {
		if v.Sign() < 0 {
			errs = append(errs, field.Invalid(specPath.Child("hard").Key(string(k)), v.String(), "must be greater than or equal to 0"))
		}
	}
	return errs
}
