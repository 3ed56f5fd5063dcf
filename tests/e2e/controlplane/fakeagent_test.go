package controlplane

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// fakeNode stands in for a node agent, as the node agent will behave: it registers a Node,
// renews its Lease, marks pods bound to it Running and Ready with an IP from its pod CIDR, and
// finishes the deletion of its terminating pods. stop() makes it fall silent like a dead node.
type fakeNode struct {
	name   string
	client kubernetes.Interface
	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex
	notReady map[string]bool // pods this agent reports as not ready
	nextIP   int
}

func newFakeNode(t *testing.T, client kubernetes.Interface, name string) *fakeNode {
	t.Helper()
	ctx := context.Background()
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}},
		Status: corev1.NodeStatus{
			Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi"),
				corev1.ResourcePods: resource.MustParse("110")},
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi"),
				corev1.ResourcePods: resource.MustParse("110")},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
				LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}},
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "198.18.0.1"}},
		},
	}
	created, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created.Status = node.Status
	if _, err := client.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-node-lease"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(name), LeaseDurationSeconds: ptr.To[int32](40), RenewTime: ptr.To(metav1.NowMicro())}}
	if _, err := client.CoordinationV1().Leases("kube-node-lease").Create(ctx, lease, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	actx, cancel := context.WithCancel(context.Background())
	n := &fakeNode{name: name, client: client, cancel: cancel, done: make(chan struct{}), notReady: map[string]bool{}}
	go n.run(actx)
	t.Cleanup(n.stop)
	return n
}

func (n *fakeNode) stop() {
	n.cancel()
	<-n.done
}

func (n *fakeNode) setNotReady(pod string, notReady bool) {
	n.mu.Lock()
	n.notReady[pod] = notReady
	n.mu.Unlock()
}

func (n *fakeNode) run(ctx context.Context) {
	defer close(n.done)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // heartbeat
		defer wg.Done()
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				l, err := n.client.CoordinationV1().Leases("kube-node-lease").Get(ctx, n.name, metav1.GetOptions{})
				if err == nil {
					l.Spec.RenewTime = ptr.To(metav1.NowMicro())
					_, _ = n.client.CoordinationV1().Leases("kube-node-lease").Update(ctx, l, metav1.UpdateOptions{})
				}
			}
		}
	}()
	go func() { // pods
		defer wg.Done()
		t := time.NewTicker(300 * time.Millisecond)
		defer t.Stop()
		for {
			n.syncPods(ctx)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	wg.Wait()
}

func (n *fakeNode) syncPods(ctx context.Context) {
	pods, err := n.client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", n.name).String()})
	if err != nil {
		return
	}
	node, err := n.client.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{})
	if err != nil || node.Spec.PodCIDR == "" {
		return
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp != nil {
			_ = n.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
			continue
		}
		n.mu.Lock()
		wantReady := !n.notReady[p.Name]
		n.mu.Unlock()
		ready := corev1.ConditionFalse
		if wantReady {
			ready = corev1.ConditionTrue
		}
		cur := corev1.ConditionStatus("")
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady {
				cur = c.Status
			}
		}
		if p.Status.Phase == corev1.PodRunning && cur == ready {
			continue
		}
		if p.Status.PodIP == "" {
			n.mu.Lock()
			n.nextIP++
			prefix := netip.MustParsePrefix(node.Spec.PodCIDR)
			ip := prefix.Addr()
			for j := 0; j < n.nextIP+1; j++ {
				ip = ip.Next()
			}
			n.mu.Unlock()
			p.Status.PodIP = ip.String()
			p.Status.PodIPs = []corev1.PodIP{{IP: ip.String()}}
			p.Status.HostIP = "198.18.0.1"
		}
		now := metav1.Now()
		p.Status.Phase = corev1.PodRunning
		p.Status.StartTime = &now
		p.Status.Conditions = []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.ContainersReady, Status: ready, LastTransitionTime: now},
			{Type: corev1.PodReady, Status: ready, LastTransitionTime: now},
		}
		_, err := n.client.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{})
		if err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) && ctx.Err() == nil {
			fmt.Println("fake agent:", err)
		}
	}
}
