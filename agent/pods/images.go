package pods

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/skiff-sh/skiff/agent/pullsecrets"
)

// ensureImage makes an image present per its pull policy (a container's imagePullPolicy, an
// image volume's pullPolicy), with the kubelet's events: Pulling, then Pulled ("Successfully
// pulled image ... Image size: N bytes.") or a Warning Failed "Failed to pull image ..." and "Error: ErrImagePull"; while the pod's pull of
// the image backs off, BackOff "Back-off pulling image ..." and "Error: ImagePullBackOff". Its
// error is an *waitingError.
func (m *Manager) ensureImage(ctx context.Context, pod *corev1.Pod, image string, policy corev1.PullPolicy) error {
	st, err := m.images.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: image}})
	if err != nil {
		msg := fmt.Sprintf("Failed to inspect image %q: %v", image, err)
		m.recorder.Event(pod, corev1.EventTypeWarning, "InspectFailed", msg)
		return m.imageFailed(pod, "ImageInspectError", msg)
	}
	present := st.Image != nil
	if present && policy != corev1.PullAlways {
		m.recorder.Eventf(pod, corev1.EventTypeNormal, "Pulled", "Container image %q already present on machine", image)
		return nil
	}
	if policy == corev1.PullNever {
		msg := fmt.Sprintf("Container image %q is not present with pull policy of Never", image)
		m.recorder.Event(pod, corev1.EventTypeWarning, "ErrImageNeverPull", msg)
		return m.imageFailed(pod, "ErrImageNeverPull", msg)
	}
	key := pullBackoffKey(pod, image)
	if m.backoffs.blocked(key, time.Now()) {
		msg := fmt.Sprintf("Back-off pulling image %q", image)
		m.recorder.Event(pod, corev1.EventTypeNormal, "BackOff", msg)
		return m.imageFailed(pod, "ImagePullBackOff", msg)
	}
	m.recorder.Eventf(pod, corev1.EventTypeNormal, "Pulling", "Pulling image %q", image)
	start := time.Now()
	if err := m.pull(ctx, pod, image); err != nil {
		if present && !authRefused(err) {
			// Always, but the registry cannot be reached: run what is here. Upstream fails;
			// skiff's lab nodes reach no registry by design. A registry that refused the pod's
			// credentials is another matter: Always is how a pod proves it may use a private
			// image, so a refusal fails the pod as upstream, even with the image cached.
			m.recorder.Eventf(pod, corev1.EventTypeNormal, "Pulled", "Container image %q already present on machine", image)
			return nil
		}
		m.recorder.Eventf(pod, corev1.EventTypeWarning, "Failed", "Failed to pull image %q: %v", image, err)
		m.backoffs.failed(key, time.Now(), imagePullBackoffInitial, imagePullBackoffMax)
		return m.imageFailed(pod, "ErrImagePull", err.Error())
	}
	// The size is the image's as the runtime reports it after the pull (best effort, as upstream).
	var size uint64
	if st, err := m.images.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: image}}); err == nil && st.Image != nil {
		size = st.Image.GetSize()
	}
	m.backoffs.succeeded(key)
	// Upstream's first duration is the pull's own, the second includes waiting in the kubelet's
	// pull queue; skiff pulls at once, so the two are the same.
	d := time.Since(start).Truncate(time.Millisecond)
	m.recorder.Eventf(pod, corev1.EventTypeNormal, "Pulled", "Successfully pulled image %q in %v (%v including waiting). Image size: %v bytes.",
		image, d, d, size)
	return nil
}

// pull pulls image with the credentials the pod's image pull secrets hold for its registry,
// trying each in turn (the most specific registry key first) as the kubelet does, or with none
// when none match. Its error is the runtime's, as the kubelet reports it (pullError); with
// several credentials tried, all of theirs.
func (m *Manager) pull(ctx context.Context, pod *corev1.Pod, image string) error {
	creds, err := m.pullCredentials(ctx, pod, image)
	if err != nil {
		return err
	}
	auths := []*runtimeapi.AuthConfig{nil} // no login matches: pull without
	if len(creds) > 0 {
		auths = auths[:0]
		for _, c := range creds {
			auths = append(auths, &runtimeapi.AuthConfig{Username: c.Username, Password: c.Password})
		}
	}
	var msgs []string
	for _, auth := range auths {
		_, err := m.images.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: image}, Auth: auth})
		if err == nil {
			return nil
		}
		msgs = append(msgs, pullError(err).Error())
	}
	if len(msgs) == 1 {
		return errors.New(msgs[0])
	}
	return fmt.Errorf("[%s]", strings.Join(msgs, ", "))
}

// authRefused says whether a pull failed because the registry refused the credentials (or
// their absence): containerd reports the registry's 401 or 403, or a failed authorization.
func authRefused(err error) bool {
	msg := strings.ToLower(err.Error())
	return strings.Contains(msg, "401 unauthorized") || strings.Contains(msg, "403 forbidden") || strings.Contains(msg, "failed to authorize")
}

// pullCredentials are the credentials the pod's image pull secrets hold for image's registry.
// A secret that cannot be read is said in the kubelet's event and the pull goes on without it;
// one whose docker config does not parse fails the pull, naming it.
func (m *Manager) pullCredentials(ctx context.Context, pod *corev1.Pod, image string) ([]pullsecrets.Credential, error) {
	node := m.nodeLogins()
	if len(pod.Spec.ImagePullSecrets) == 0 {
		return node.Lookup(image), nil
	}
	var secrets []*corev1.Secret
	var missing []string
	for _, ref := range pod.Spec.ImagePullSecrets {
		s, err := m.client.CoreV1().Secrets(pod.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			missing = append(missing, ref.Name)
			continue
		}
		secrets = append(secrets, s)
	}
	if len(missing) > 0 {
		m.recorder.Eventf(pod, corev1.EventTypeWarning, "FailedToRetrieveImagePullSecret",
			"Unable to retrieve some image pull secrets (%s); attempting to pull the image may not succeed.", strings.Join(missing, ", "))
	}
	keyring, err := pullsecrets.FromSecrets(secrets)
	if err != nil {
		return nil, err
	}
	return pullsecrets.Union{keyring, node}.Lookup(image), nil
}

// nodeLogins reads the node's docker config (Options.RegistryLogins); one that cannot be read
// or parsed is logged and serves no logins, as the kubelet does with its config.json.
func (m *Manager) nodeLogins() *pullsecrets.Keyring {
	if m.opts.RegistryLogins == "" {
		return nil
	}
	b, err := os.ReadFile(m.opts.RegistryLogins)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err == nil {
		var k *pullsecrets.Keyring
		if k, err = pullsecrets.FromDockerConfig(b); err == nil {
			return k
		}
	}
	m.log.Warn("node registry logins not used", "file", m.opts.RegistryLogins, "err", err)
	return nil
}

// imageVolumes are the image volumes c mounts that are not mounted yet.
func (m *Manager) imageVolumes(pod *corev1.Pod, c corev1.Container) []corev1.Volume {
	if m.opts.Volumes == nil {
		return nil
	}
	mounted := map[string]bool{}
	for _, vm := range c.VolumeMounts {
		mounted[vm.Name] = true
	}
	var out []corev1.Volume
	for _, v := range pod.Spec.Volumes {
		if v.Image != nil && mounted[v.Name] && !m.opts.Volumes.ImageMounted(pod, v.Name) {
			out = append(out, v)
		}
	}
	return out
}

// pullImageVolumes makes the images of c's image volumes present per their pullPolicy, as the
// kubelet does before it starts a container that mounts them. A volume whose image cannot be
// had keeps c waiting with the pull's reason (ErrImagePull, ImagePullBackOff, ErrImageNeverPull)
// and message; the others are still pulled.
func (m *Manager) pullImageVolumes(ctx context.Context, pod *corev1.Pod, c corev1.Container) error {
	var last error
	for _, v := range m.imageVolumes(pod, c) {
		if err := m.ensureImage(ctx, pod, v.Image.Reference, v.Image.PullPolicy); err != nil {
			last = err
		}
	}
	return last
}

// mountImageVolumes mounts c's image volumes that are not mounted yet, their images pulled.
// A mount that fails is a CreateContainerError (upstream's runtime fails the container's
// creation the same way), retried with the container's start backoff.
func (m *Manager) mountImageVolumes(ctx context.Context, pod *corev1.Pod, c corev1.Container) error {
	for _, v := range m.imageVolumes(pod, c) {
		if err := m.opts.Volumes.MountImage(ctx, pod, v.Name, v.Image.Reference); err != nil {
			return &waitingError{Reason: "CreateContainerError", Message: fmt.Sprintf("failed to mount image volume %q: %v", v.Name, err)}
		}
	}
	return nil
}

// imageFailed records the kubelet's Warning Failed "Error: <reason>" of a container whose image
// is not there and returns the error carrying its waiting state.
func (m *Manager) imageFailed(pod *corev1.Pod, reason, msg string) error {
	m.recorder.Eventf(pod, corev1.EventTypeWarning, "Failed", "Error: %s", reason)
	return &waitingError{Reason: reason, Message: msg}
}

// pullError is a CRI pull error as the kubelet reports it: a gRPC status of code Unknown (what
// containerd returns for most failures) loses its "rpc error: code = Unknown desc = " prefix.
func pullError(err error) error {
	if s, ok := status.FromError(err); ok && s.Code() == codes.Unknown {
		return errors.New(s.Message())
	}
	return err
}

// pullBackoffKey keys a pod's pull backoff of an image in m.backoffs, upstream's
// "<uid>_<image>" beside the crash backoff's "<uid>/<container>"; stopAll drops both with the pod.
func pullBackoffKey(pod *corev1.Pod, image string) string { return string(pod.UID) + "_" + image }
