// Package static runs pods from manifest files on the node (--pod-manifest-path,
// /etc/skiff/manifests), as the kubelet's static pods: they run without the API server, and
// the agent publishes a mirror pod for each — named <pod>-<node>, owned by the Node, with the
// kubernetes.io/config.{source,hash,seen,mirror} annotations — which comes back if deleted.
// Editing a file replaces the pod; removing it stops the pod.
package static

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/controlplane/scheme"
)

// Annotations upstream puts on static and mirror pods.
const (
	SourceAnnotation = "kubernetes.io/config.source"
	HashAnnotation   = "kubernetes.io/config.hash"
	SeenAnnotation   = "kubernetes.io/config.seen"
	MirrorAnnotation = corev1.MirrorPodAnnotationKey
)

// Load reads every manifest in dir and returns the static pods for node. A file that does not
// hold a valid Pod is reported in errs and skipped; the others still run.
func Load(dir, node string) (pods []*corev1.Pod, errs []error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, nil
		}
		return nil, []error{err}
	}
	decoder := scheme.Codecs.UniversalDeserializer()
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || strings.HasPrefix(name, ".") || !(strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml") || strings.HasSuffix(name, ".json")) {
			continue
		}
		path := filepath.Join(dir, name)
		b, err := os.ReadFile(path)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		obj, _, err := decoder.Decode(b, nil, nil)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", path, err))
			continue
		}
		pod, ok := obj.(*corev1.Pod)
		if !ok {
			errs = append(errs, fmt.Errorf("%s: a static pod manifest must hold a Pod, not %T", path, obj))
			continue
		}
		if pod.Name == "" {
			errs = append(errs, fmt.Errorf("%s: the pod has no name", path))
			continue
		}
		scheme.Scheme.Default(pod)
		sum := sha256.Sum256(append(b, node...))
		hash := hex.EncodeToString(sum[:16])
		pod.Name = pod.Name + "-" + node
		if pod.Namespace == "" {
			pod.Namespace = metav1.NamespaceDefault
		}
		pod.UID = types.UID(hash)
		pod.Spec.NodeName = node
		if pod.Annotations == nil {
			pod.Annotations = map[string]string{}
		}
		pod.Annotations[SourceAnnotation] = "file"
		pod.Annotations[HashAnnotation] = hash
		pods = append(pods, pod)
	}
	sort.Slice(pods, func(i, j int) bool { return pods[i].Name < pods[j].Name })
	return pods, errs
}

// Mirror is the API's view of a static pod.
func Mirror(p *corev1.Pod, node *corev1.Node, seen time.Time) *corev1.Pod {
	m := p.DeepCopy()
	m.UID, m.ResourceVersion = "", ""
	m.Annotations[MirrorAnnotation] = p.Annotations[HashAnnotation]
	m.Annotations[SeenAnnotation] = seen.Format(time.RFC3339Nano)
	m.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID, Controller: ptr.To(true)}}
	return m
}

// Source hands the current static pods to the pod manager.
type Source interface {
	SetStatic(pods []*corev1.Pod)
}

// Run reloads dir every period, passes the pods to src and keeps their mirror pods in the
// API, until ctx ends. The pods run even when the API server is unreachable.
func Run(ctx context.Context, c kubernetes.Interface, dir, node string, src Source, period time.Duration, log *slog.Logger) {
	seen := map[string]time.Time{}
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		pods, errs := Load(dir, node)
		for _, err := range errs {
			log.Warn("static pod manifest", "err", err)
		}
		for _, p := range pods {
			h := p.Annotations[HashAnnotation]
			if _, ok := seen[h]; !ok {
				seen[h] = time.Now()
			}
		}
		src.SetStatic(pods)
		if err := syncMirrors(ctx, c, node, pods, seen); err != nil && ctx.Err() == nil {
			log.Debug("mirror pods", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func syncMirrors(ctx context.Context, c kubernetes.Interface, nodeName string, pods []*corev1.Pod, seen map[string]time.Time) error {
	node, err := c.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	for _, p := range pods {
		cur, err := c.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		switch {
		// The Node authorizer lets a node read only pods bound to it: a mirror not created
		// yet is no such pod, and its read is forbidden rather than not found.
		case apierrors.IsNotFound(err), apierrors.IsForbidden(err):
		case err != nil:
			return err
		case cur.Annotations[MirrorAnnotation] == p.Annotations[HashAnnotation] && cur.DeletionTimestamp == nil:
			continue
		default:
			// An outdated or terminating mirror: replace it.
			_ = c.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0),
				Preconditions: &metav1.Preconditions{UID: &cur.UID}})
		}
		if _, err := c.CoreV1().Pods(p.Namespace).Create(ctx, Mirror(p, node, seen[p.Annotations[HashAnnotation]]), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return nil
}
