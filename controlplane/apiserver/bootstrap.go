package apiserver

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	networkingv1 "k8s.io/api/networking/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	fcbootstrap "k8s.io/apiserver/pkg/apis/flowcontrol/bootstrap"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/controlplane/pki"
	"github.com/skiff-sh/skiff/controlplane/printers"
	"github.com/skiff-sh/skiff/controlplane/validation"
	"github.com/skiff-sh/skiff/internal/bootstraptoken"
)

// SystemNamespaces exist in every cluster.
var SystemNamespaces = []string{"default", "kube-system", "kube-public", "kube-node-lease"}

// bootstrap keeps the objects every cluster has in place, as upstream's bootstrap
// controller does: the built-in namespaces, the node-join token's Secret, and the `kubernetes` Service in default with its
// Endpoints and EndpointSlice pointing at this API server. It reconciles every 10 s, so a
// deleted object comes back.
type bootstrap struct {
	client    kubernetes.Interface
	advertise net.IP
	port      int
	serviceIP string
	// serviceCIDR is --service-cidr (one CIDR per family, comma-separated), shown as the
	// "kubernetes" ServiceCIDR.
	serviceCIDR string
	// joinToken is the node-join bootstrap token, kept as its kube-system Secret.
	joinToken bootstraptoken.Token
	// agentToken is the agent-only join token (--agent-token), kept as its Secret too.
	agentToken bootstraptoken.Token
	// clientCA and frontProxyCA are the cluster CA and the front-proxy CA (PEM), published
	// for extension API servers.
	clientCA, frontProxyCA []byte
	// peers, if set, announces this server in etcd and lists every live one, so the
	// kubernetes Service's endpoints are all the API servers sharing the store.
	peers *peerLeases
	log   *slog.Logger
}

func (b bootstrap) run(ctx context.Context) {
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		if err := b.reconcile(ctx); err != nil {
			b.log.Warn("bootstrap objects", "err", err)
		}
	}, 10*time.Second)
}

func (b bootstrap) reconcile(ctx context.Context) error {
	for _, name := range SystemNamespaces {
		if err := createUnlessFound(ctx, func(ctx context.Context) error {
			_, err := b.client.CoreV1().Namespaces().Get(ctx, name, cached)
			return err
		}, func(ctx context.Context) error {
			_, err := b.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
			return err
		}); err != nil {
			return err
		}
	}
	if err := b.ensureTokenSecret(ctx); err != nil {
		return err
	}
	if err := b.ensureClasses(ctx); err != nil {
		return err
	}
	if err := b.ensureFlowControl(ctx); err != nil {
		return err
	}
	if err := b.ensureExtensionAuthentication(ctx); err != nil {
		return err
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "kubernetes", Namespace: "default",
			Labels: map[string]string{"component": "apiserver", "provider": "kubernetes"}},
		Spec: corev1.ServiceSpec{
			Type:      corev1.ServiceTypeClusterIP,
			ClusterIP: b.serviceIP,
			Ports: []corev1.ServicePort{{Name: "https", Port: 443, Protocol: corev1.ProtocolTCP,
				TargetPort: intstr.FromInt32(int32(b.port))}},
			SessionAffinity: corev1.ServiceAffinityNone,
		},
	}
	if err := createUnlessFound(ctx, func(ctx context.Context) error {
		_, err := b.client.CoreV1().Services("default").Get(ctx, svc.Name, cached)
		return err
	}, func(ctx context.Context) error {
		_, err := b.client.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{})
		return err
	}); err != nil {
		return err
	}
	addrs := []string{b.advertise.String()}
	if b.peers != nil {
		var err error
		if addrs, err = b.peers.Renew(ctx); err != nil {
			return fmt.Errorf("announcing this API server: %w", err)
		}
	}
	port := int32(b.port)
	ep := &corev1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Name: "kubernetes", Namespace: "default",
			Labels: map[string]string{"endpointslice.kubernetes.io/skip-mirror": "true"}},
		Subsets: []corev1.EndpointSubset{{Ports: []corev1.EndpointPort{{Name: "https", Port: port, Protocol: corev1.ProtocolTCP}}}},
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "kubernetes", Namespace: "default",
			Labels: map[string]string{discoveryv1.LabelServiceName: "kubernetes", discoveryv1.LabelManagedBy: "skiff-apiserver"}},
		AddressType: addressType(b.advertise),
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("https"), Port: &port, Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	for _, ip := range addrs {
		ep.Subsets[0].Addresses = append(ep.Subsets[0].Addresses, corev1.EndpointAddress{IP: ip})
		slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{Addresses: []string{ip},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)}})
	}
	if err := upsertEndpoints(ctx, b.client, ep); err != nil {
		return err
	}
	if err := upsertSlice(ctx, b.client, slice); err != nil {
		return err
	}
	return b.ensureServiceCIDR(ctx)
}

// addressType is the EndpointSlice address type of the API server's address: the kubernetes
// Service is of the cluster's primary family, which is the advertised address's.
func addressType(ip net.IP) discoveryv1.AddressType {
	if ip.To4() == nil && ip.To16() != nil {
		return discoveryv1.AddressTypeIPv6
	}
	return discoveryv1.AddressTypeIPv4
}

// LocalPathProvisioner provisions the default StorageClass's volumes: directories under the
// data dir of the node the claim's first pod is scheduled to (controlplane/controllers/localpath).
const LocalPathProvisioner = "skiff.sh/local-path"

// ensureClasses creates the system PriorityClasses (as upstream's scheduling bootstrap)
// and the default StorageClass local-path (as k3s ships one) when they are missing.
func (b bootstrap) ensureClasses(ctx context.Context) error {
	var classes []*schedulingv1.PriorityClass
	for name, value := range validation.SystemPriorityClasses {
		pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value,
			Description: "Used for system critical pods that must run in the cluster, but can be moved to another node if necessary."}
		if name == validation.SystemNodeCritical {
			pc.Description = "Used for system critical pods that must not be moved from their current node."
		}
		classes = append(classes, pc)
	}
	pcs := b.client.SchedulingV1().PriorityClasses()
	if err := createMissing(ctx, classes, func(ctx context.Context) (runtime.Object, error) { return pcs.List(ctx, cachedList) },
		func(ctx context.Context, pc *schedulingv1.PriorityClass) error {
			_, err := pcs.Create(ctx, pc, metav1.CreateOptions{})
			return err
		}); err != nil {
		return err
	}
	sc := &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: "local-path", Annotations: map[string]string{printers.IsDefaultClassAnnotation: "true"}},
		Provisioner:       LocalPathProvisioner,
		ReclaimPolicy:     ptr.To(corev1.PersistentVolumeReclaimDelete),
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer),
	}
	return createUnlessFound(ctx, func(ctx context.Context) error {
		_, err := b.client.StorageV1().StorageClasses().Get(ctx, sc.Name, cached)
		return err
	}, func(ctx context.Context) error {
		_, err := b.client.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{})
		return err
	})
}

// ensureFlowControl creates upstream's bootstrap FlowSchemas and priority levels that are
// missing (the mandatory exempt and catch-all ones, and the suggested system, node-high,
// leader-election, workload and global-default ones), as kube-apiserver's configuration
// producer does. Ones an operator changed are left as they are.
func (b bootstrap) ensureFlowControl(ctx context.Context) error {
	levels := append(append([]*flowcontrolv1.PriorityLevelConfiguration{}, fcbootstrap.MandatoryPriorityLevelConfigurations...), fcbootstrap.SuggestedPriorityLevelConfigurations...)
	plcs := b.client.FlowcontrolV1().PriorityLevelConfigurations()
	if err := createMissing(ctx, levels, func(ctx context.Context) (runtime.Object, error) { return plcs.List(ctx, cachedList) },
		func(ctx context.Context, plc *flowcontrolv1.PriorityLevelConfiguration) error {
			_, err := plcs.Create(ctx, plc.DeepCopy(), metav1.CreateOptions{})
			return err
		}); err != nil {
		return err
	}
	schemas := append(append([]*flowcontrolv1.FlowSchema{}, fcbootstrap.MandatoryFlowSchemas...), fcbootstrap.SuggestedFlowSchemas...)
	fss := b.client.FlowcontrolV1().FlowSchemas()
	return createMissing(ctx, schemas, func(ctx context.Context) (runtime.Object, error) { return fss.List(ctx, cachedList) },
		func(ctx context.Context, fs *flowcontrolv1.FlowSchema) error {
			_, err := fss.Create(ctx, fs.DeepCopy(), metav1.CreateOptions{})
			return err
		})
}

// cached and cachedList read from the watch cache: the reconcile only asks whether objects
// exist, and a stale answer costs at most a create refused as AlreadyExists.
var (
	cached     = metav1.GetOptions{ResourceVersion: "0"}
	cachedList = metav1.ListOptions{ResourceVersion: "0"}
)

// createUnlessFound creates an object when get says it is not found, so that a settled
// cluster's reconcile only reads (one POST refused as AlreadyExists per object every 10 s
// was most of a scale run's 4xx answers).
func createUnlessFound(ctx context.Context, get, create func(context.Context) error) error {
	err := get(ctx)
	if !apierrors.IsNotFound(err) {
		return err
	}
	if err := create(ctx); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

// createMissing creates those of want that one list does not hold, by name.
func createMissing[T interface{ GetName() string }](ctx context.Context, want []T, list func(context.Context) (runtime.Object, error),
	create func(context.Context, T) error) error {
	l, err := list(ctx)
	if err != nil {
		return err
	}
	have := map[string]bool{}
	if err := meta.EachListItem(l, func(o runtime.Object) error {
		m, err := meta.Accessor(o)
		if err == nil {
			have[m.GetName()] = true
		}
		return err
	}); err != nil {
		return err
	}
	for _, w := range want {
		if have[w.GetName()] {
			continue
		}
		if err := create(ctx, w); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return nil
}

// ensureServiceCIDR keeps the default ServiceCIDR, Ready, as upstream's API server does for
// its --service-cidr. One with other CIDRs (the flag changed across a restart, or someone
// recreated it) is replaced: its CIDRs are immutable, and kube-proxy's nftables mode acts on them.
func (b bootstrap) ensureServiceCIDR(ctx context.Context) error {
	c := b.client.NetworkingV1().ServiceCIDRs()
	var want []string
	for _, cidr := range strings.Split(b.serviceCIDR, ",") {
		want = append(want, canonicalPrefix(strings.TrimSpace(cidr)))
	}
	sc, err := c.Get(ctx, validation.DefaultServiceCIDR, metav1.GetOptions{})
	if err == nil && !slices.Equal(sc.Spec.CIDRs, want) {
		b.log.Warn("replacing the default ServiceCIDR", "had", sc.Spec.CIDRs, "serviceCIDR", want)
		err = c.Delete(ctx, sc.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &sc.UID}})
		if err == nil || apierrors.IsNotFound(err) {
			err = apierrors.NewNotFound(networkingv1.Resource("servicecidrs"), sc.Name)
		}
	}
	if apierrors.IsNotFound(err) {
		sc, err = c.Create(ctx, &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: validation.DefaultServiceCIDR},
			Spec: networkingv1.ServiceCIDRSpec{CIDRs: want}}, metav1.CreateOptions{})
	}
	if err != nil {
		return err
	}
	for _, cond := range sc.Status.Conditions {
		if cond.Type == networkingv1.ServiceCIDRConditionReady && cond.Status == metav1.ConditionTrue {
			return nil
		}
	}
	sc.Status.Conditions = []metav1.Condition{{Type: networkingv1.ServiceCIDRConditionReady, Status: metav1.ConditionTrue,
		Reason: "ServiceCIDRReady", Message: "ClusterIPs are allocated from this range", LastTransitionTime: metav1.Now()}}
	_, err = c.UpdateStatus(ctx, sc, metav1.UpdateOptions{})
	return err
}

// canonicalPrefix drops host bits (10.96.0.1/12 is 10.96.0.0/12), as ServiceCIDRs require.
func canonicalPrefix(cidr string) string {
	if p, err := netip.ParsePrefix(cidr); err == nil {
		return p.Masked().String()
	}
	return cidr
}

func upsertEndpoints(ctx context.Context, c kubernetes.Interface, want *corev1.Endpoints) error {
	cur, err := c.CoreV1().Endpoints(want.Namespace).Get(ctx, want.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = c.CoreV1().Endpoints(want.Namespace).Create(ctx, want, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	if equalSubsets(cur.Subsets, want.Subsets) {
		return nil
	}
	cur.Subsets = want.Subsets
	_, err = c.CoreV1().Endpoints(want.Namespace).Update(ctx, cur, metav1.UpdateOptions{})
	return err
}

func upsertSlice(ctx context.Context, c kubernetes.Interface, want *discoveryv1.EndpointSlice) error {
	cur, err := c.DiscoveryV1().EndpointSlices(want.Namespace).Get(ctx, want.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = c.DiscoveryV1().EndpointSlices(want.Namespace).Create(ctx, want, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	if sliceAddresses(cur) == sliceAddresses(want) && len(cur.Ports) == 1 && cur.Ports[0].Port != nil && *cur.Ports[0].Port == *want.Ports[0].Port {
		return nil
	}
	cur.Endpoints, cur.Ports = want.Endpoints, want.Ports
	_, err = c.DiscoveryV1().EndpointSlices(want.Namespace).Update(ctx, cur, metav1.UpdateOptions{})
	return err
}

func equalSubsets(a, b []corev1.EndpointSubset) bool {
	if len(a) != 1 || len(b) != 1 || len(a[0].Ports) != 1 || len(a[0].Addresses) != len(b[0].Addresses) || len(a[0].NotReadyAddresses) > 0 {
		return false
	}
	for i := range a[0].Addresses {
		if a[0].Addresses[i].IP != b[0].Addresses[i].IP {
			return false
		}
	}
	return a[0].Ports[0].Port == b[0].Ports[0].Port
}

// sliceAddresses is a slice's ready addresses in order, for comparing two slices.
func sliceAddresses(s *discoveryv1.EndpointSlice) string {
	var out []string
	for _, e := range s.Endpoints {
		ready := e.Conditions.Ready != nil && *e.Conditions.Ready
		out = append(out, fmt.Sprintf("%v/%v", e.Addresses, ready))
	}
	return strings.Join(out, ",")
}

// ensureExtensionAuthentication keeps kube-system/extension-apiserver-authentication as
// kube-apiserver publishes it: what an extension API server behind an APIService needs to
// authenticate the aggregator's requests — the front-proxy CA and the names and headers it
// sends the user in — and the cluster's client CA. Extension servers read it with the
// extension-apiserver-authentication-reader Role.
func (b bootstrap) ensureExtensionAuthentication(ctx context.Context) error {
	if len(b.clientCA) == 0 || len(b.frontProxyCA) == 0 {
		return nil
	}
	want := map[string]string{
		"client-ca-file":                     string(b.clientCA),
		"requestheader-client-ca-file":       string(b.frontProxyCA),
		"requestheader-allowed-names":        `["` + pki.FrontProxyClientName + `"]`,
		"requestheader-username-headers":     `["X-Remote-User"]`,
		"requestheader-group-headers":        `["X-Remote-Group"]`,
		"requestheader-extra-headers-prefix": `["X-Remote-Extra-"]`,
		"requestheader-uid-headers":          `["X-Remote-Uid"]`,
	}
	cms := b.client.CoreV1().ConfigMaps(metav1.NamespaceSystem)
	cur, err := cms.Get(ctx, "extension-apiserver-authentication", metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "extension-apiserver-authentication",
			Namespace: metav1.NamespaceSystem}, Data: want}, metav1.CreateOptions{})
		return err
	}
	if err != nil || apiequality.Semantic.DeepEqual(cur.Data, want) {
		return err
	}
	cur.Data = want
	_, err = cms.Update(ctx, cur, metav1.UpdateOptions{})
	return err
}

// ensureTokenSecret keeps the join token's Secret as the token file says; deleting the Secret
// revokes joins only until the next reconcile, so to revoke, delete the token file too and
// restart the server (which writes a new token).
func (b bootstrap) ensureTokenSecret(ctx context.Context) error {
	if err := b.ensureOneTokenSecret(ctx, b.joinToken, "skiff node join token (<data-dir>/token)"); err != nil {
		return err
	}
	return b.ensureOneTokenSecret(ctx, b.agentToken, "skiff agent-only join token (<data-dir>/agent-token)")
}

func (b bootstrap) ensureOneTokenSecret(ctx context.Context, token bootstraptoken.Token, description string) error {
	if token.ID == "" {
		return nil
	}
	want := bootstraptoken.Secret(token, description, time.Time{}, bootstraptoken.NodeGroup)
	secrets := b.client.CoreV1().Secrets(bootstraptoken.SecretNamespace)
	got, err := secrets.Get(ctx, want.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = secrets.Create(ctx, want, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	case err != nil:
		return err
	case apiequality.Semantic.DeepEqual(got.Data, want.Data) && got.Type == want.Type:
		return nil
	}
	if got.Type != want.Type {
		// The type is immutable: replace the Secret.
		if err := secrets.Delete(ctx, want.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		_, err = secrets.Create(ctx, want, metav1.CreateOptions{})
		return err
	}
	got = got.DeepCopy()
	got.Data = want.Data
	_, err = secrets.Update(ctx, got, metav1.UpdateOptions{})
	return err
}

// ControlPlaneLabel marks the server's own node (kubectl get nodes: ROLES control-plane).
const ControlPlaneLabel = "node-role.kubernetes.io/control-plane"

// markControlPlane labels the server's own node once its agent has registered it, as
// kubeadm's mark-control-plane phase does: NodeRestriction keeps a node from setting a
// node-role label on itself, so the control plane sets it.
func (b bootstrap) markControlPlane(ctx context.Context, node string) {
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		n, err := b.client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return // not registered yet
		}
		if _, ok := n.Labels[ControlPlaneLabel]; ok {
			return
		}
		patch := []byte(`{"metadata":{"labels":{"` + ControlPlaneLabel + `":""}}}`)
		if _, err := b.client.CoreV1().Nodes().Patch(ctx, node, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
			b.log.Warn("labelling the control-plane node", "node", node, "err", err)
			return
		}
		b.log.Info("labelled the control-plane node", "node", node, "label", ControlPlaneLabel)
	}, 500*time.Millisecond)
}
