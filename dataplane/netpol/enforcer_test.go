package netpol

import (
	"net/netip"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/skiff-sh/skiff/dataplane/policy"
)

func viewPod(name, node, ip string, labels map[string]string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: labels}, Spec: corev1.PodSpec{NodeName: node},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	if ip != "" {
		p.Status.PodIP, p.Status.PodIPs = ip, []corev1.PodIP{{IP: ip}}
	}
	return p
}

// What each pod change asks of the enforcer: nothing when the maps do not depend on what
// changed, one identity entry per address for another node's pod, a compilation otherwise.
func TestPodViewsClassifyChanges(t *testing.T) {
	kick := make(chan struct{}, 1)
	v := &podViews{m: map[PodRef]policy.Pod{}, node: "n1", ips: map[netip.Addr]string{}, owner: map[netip.Addr]PodRef{}}
	h := v.handler(kick)
	web := map[string]string{"app": "web"}
	key := policy.IdentityKey(PolicyPod(viewPod("x", "", "", web)))
	expect := func(what string, full bool, ips map[netip.Addr]string, kicked bool) {
		t.Helper()
		gotKick := false
		select {
		case <-kick:
			gotKick = true
		default:
		}
		gotFull, gotIPs := v.take()
		if gotFull != full || !reflect.DeepEqual(gotIPs, ips) || gotKick != kicked {
			t.Errorf("%s: full %v, ips %v, kicked %v; want %v, %v, %v", what, gotFull, gotIPs, gotKick, full, ips, kicked)
		}
	}
	a := netip.MustParseAddr("10.1.0.5")

	h.OnAdd(viewPod("r1", "n2", "", web), false)
	expect("another node's pod, no address yet", false, map[netip.Addr]string{}, true)
	h.OnUpdate(nil, viewPod("r1", "n2", "10.1.0.5", web))
	expect("it got its address", false, map[netip.Addr]string{a: key}, true)
	ready := viewPod("r1", "n2", "10.1.0.5", web)
	ready.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	h.OnUpdate(nil, ready)
	expect("only its conditions changed", false, map[netip.Addr]string{}, false)
	h.OnUpdate(nil, viewPod("r1", "n2", "10.1.0.5", map[string]string{"app": "api"}))
	expect("relabelled", false, map[netip.Addr]string{a: policy.IdentityKey(PolicyPod(viewPod("x", "", "", map[string]string{"app": "api"})))}, true)

	// The address goes to another pod before the first one's deletion is seen: the
	// deletion leaves the new owner's identity alone.
	h.OnAdd(viewPod("r2", "n3", "10.1.0.5", web), false)
	h.OnDelete(viewPod("r1", "n2", "10.1.0.5", nil))
	expect("the address reused, then the old pod's deletion", false, map[netip.Addr]string{a: key}, true)
	h.OnDelete(cache.DeletedFinalStateUnknown{Key: "ns/r2", Obj: viewPod("r2", "n3", "10.1.0.5", web)})
	expect("the last pod with the address gone", false, map[netip.Addr]string{a: ""}, true)

	h.OnAdd(viewPod("mine", "n1", "10.0.0.7", web), false)
	expect("this node's pod", true, map[netip.Addr]string{}, true)
	hostNet := viewPod("hn", "n2", "198.18.0.3", web)
	hostNet.Spec.HostNetwork = true
	h.OnAdd(hostNet, false)
	expect("a host-network pod", true, map[netip.Addr]string{}, true)

	v.fullHandler(kick).OnAdd(&networkingv1.NetworkPolicy{}, false)
	expect("a policy", true, map[netip.Addr]string{}, true)

	// Once identities count only the labels policies name, a rolling update's new
	// pod-template-hash is no new identity, and a change of such a label alone is nothing.
	v.rekey(map[string]bool{"app": true})
	b := netip.MustParseAddr("10.1.0.6")
	h.OnAdd(viewPod("r3", "n2", "10.1.0.6", map[string]string{"app": "web", "pod-template-hash": "new"}), false)
	expect("a new ReplicaSet's pod", false, map[netip.Addr]string{b: "ns:app=web"}, true)
	h.OnUpdate(nil, viewPod("r3", "n2", "10.1.0.6", map[string]string{"app": "web", "pod-template-hash": "newer"}))
	expect("a label no policy names changed", false, map[netip.Addr]string{}, false)
}
