package agent

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/tests/e2e/framework"
)

// TestImagePull pulls an image from a registry the test runs on loopback in the node's network
// namespace (where the agent's containerd runs), through CRI's registry config_path: the pod
// runs, and the events are the kubelet's; an image the registry lacks fails to pull with the
// kubelet's events and waiting reasons.
func TestImagePull(t *testing.T) {
	n := newRegistryNode(t)
	c, ctx, reg := n.c, n.ctx, n.reg
	// The registry serves skiff's netutil image under another name, as 127.0.0.1:PORT/test/netutil:pulled.
	_, images := framework.AgentArtifacts(t)
	if _, err := reg.AddArchive(filepath.Join(images, "netutil.tar"), "test/netutil", "pulled"); err != nil {
		t.Fatal(err)
	}
	image, missing := reg.Ref("test/netutil", "pulled"), reg.Ref("test/netutil", "missing")

	// The server's node keeps its control-plane taint: the pods tolerate it.
	pod := func(name, image string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Tolerations:                   []corev1.Toleration{{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists}},
			Containers:                    []corev1.Container{{Name: "c", Image: image, ImagePullPolicy: corev1.PullAlways}}}}
	}
	for _, p := range []*corev1.Pod{pod("pulled", image), pod("missing", missing)} {
		if _, err := c.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { deletePods(t, c, "pulled", "missing") })

	eventually(t, 90*time.Second, "the pulled image's pod Running", func() (bool, string) {
		p, err := c.CoreV1().Pods("default").Get(ctx, "pulled", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return p.Status.Phase == corev1.PodRunning, fmt.Sprintf("%s %+v\n%s", p.Status.Phase, p.Status.ContainerStatuses, podEvents(ctx, c, "pulled"))
	})
	// The image came from the registry: its manifest was fetched by the tag.
	fetched := false
	for _, r := range reg.Requests() {
		fetched = fetched || r == "GET /v2/test/netutil/manifests/pulled" || r == "HEAD /v2/test/netutil/manifests/pulled"
	}
	if !fetched {
		t.Errorf("the registry was not asked for the manifest; requests: %v", reg.Requests())
	}

	// The kubelet's events: Pulling, then Pulled with both durations and the image's size.
	pulled := regexp.MustCompile(`^Successfully pulled image "` + regexp.QuoteMeta(image) +
		`" in (\S+) \((\S+) including waiting\)\. Image size: (\d+) bytes\.$`)
	eventually(t, 30*time.Second, "Pulling and Pulled events", func() (bool, string) {
		evs := podEvents(ctx, c, "pulled")
		pulling, ok := false, false
		for _, e := range evs {
			pulling = pulling || (e.Reason == "Pulling" && e.Type == corev1.EventTypeNormal && e.Message == fmt.Sprintf("Pulling image %q", image))
			if m := pulled.FindStringSubmatch(e.Message); m != nil && e.Reason == "Pulled" && e.Type == corev1.EventTypeNormal {
				d1, err1 := time.ParseDuration(m[1])
				d2, err2 := time.ParseDuration(m[2])
				size, err3 := strconv.ParseUint(m[3], 10, 64)
				ok = err1 == nil && err2 == nil && err3 == nil && d1 >= 0 && d2 >= d1 && size > 0
				if ok {
					t.Logf("Pulled: %s", e.Message)
				}
			}
		}
		return pulling && ok, evs.String()
	})

	// An image the registry does not have: the kubelet's Failed events, then its backoff.
	failed := regexp.MustCompile(`^Failed to pull image "` + regexp.QuoteMeta(missing) + `": .+`)
	eventually(t, 60*time.Second, "Failed and BackOff events of the missing image", func() (bool, string) {
		evs := podEvents(ctx, c, "missing")
		var pullFailed, errImagePull, backOff bool
		for _, e := range evs {
			pullFailed = pullFailed || (e.Reason == "Failed" && e.Type == corev1.EventTypeWarning && failed.MatchString(e.Message))
			errImagePull = errImagePull || (e.Reason == "Failed" && e.Type == corev1.EventTypeWarning && e.Message == "Error: ErrImagePull")
			backOff = backOff || (e.Reason == "BackOff" && e.Message == fmt.Sprintf("Back-off pulling image %q", missing))
		}
		return pullFailed && errImagePull && backOff, evs.String()
	})
	for _, e := range podEvents(ctx, c, "missing") {
		if e.Reason == "Pulled" {
			t.Errorf("a Pulled event for the missing image: %s", e.Message)
		}
	}
	eventually(t, 30*time.Second, "the missing image's container waiting with ErrImagePull or ImagePullBackOff", func() (bool, string) {
		p, err := c.CoreV1().Pods("default").Get(ctx, "missing", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].State.Waiting == nil {
			return false, fmt.Sprintf("%s %+v", p.Status.Phase, p.Status.ContainerStatuses)
		}
		w := p.Status.ContainerStatuses[0].State.Waiting
		return p.Status.Phase == corev1.PodPending && (w.Reason == "ErrImagePull" || w.Reason == "ImagePullBackOff"),
			fmt.Sprintf("%s waiting %s: %s", p.Status.Phase, w.Reason, w.Message)
	})
}

type eventList []corev1.Event

func (l eventList) String() string {
	var b strings.Builder
	for _, e := range l {
		fmt.Fprintf(&b, "%s %s (x%d): %s\n", e.Type, e.Reason, e.Count, e.Message)
	}
	return b.String()
}

// podEvents lists the events of a pod in the default namespace.
func podEvents(ctx context.Context, c kubernetes.Interface, name string) eventList {
	list, err := c.CoreV1().Events("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil
	}
	var out eventList
	for _, e := range list.Items {
		if e.InvolvedObject.Kind == "Pod" && e.InvolvedObject.Name == name {
			out = append(out, e)
		}
	}
	return out
}

// deletePods deletes pods of the default namespace and waits until they are gone, so the agent
// stops their containers and sandboxes before the server goes.
func deletePods(t *testing.T, c kubernetes.Interface, names ...string) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, n := range names {
		if err := c.CoreV1().Pods("default").Delete(ctx, n, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](1)}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete pod %s: %v", n, err)
		}
	}
	for _, n := range names {
		for {
			_, err := c.CoreV1().Pods("default").Get(ctx, n, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				break
			}
			if ctx.Err() != nil {
				t.Errorf("pod %s not gone after delete: %v", n, err)
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}
