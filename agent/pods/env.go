package pods

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/skiff-sh/skiff/agent/downward"
	"github.com/skiff-sh/skiff/agent/expansion"
)

// ServiceEnv renders the Docker-links-style variables upstream sets for every Service of the
// pod's namespace (and the kubernetes Service): FOO_SERVICE_HOST, FOO_SERVICE_PORT,
// FOO_PORT_80_TCP and friends.
func ServiceEnv(services []*corev1.Service) map[string]string {
	env := map[string]string{}
	for _, s := range services {
		if s.Spec.ClusterIP == "" || s.Spec.ClusterIP == corev1.ClusterIPNone || len(s.Spec.Ports) == 0 {
			continue
		}
		name := strings.ToUpper(strings.ReplaceAll(s.Name, "-", "_"))
		ip := s.Spec.ClusterIP
		env[name+"_SERVICE_HOST"] = ip
		env[name+"_SERVICE_PORT"] = strconv.Itoa(int(s.Spec.Ports[0].Port))
		for _, p := range s.Spec.Ports {
			if p.Name != "" {
				env[name+"_SERVICE_PORT_"+strings.ToUpper(strings.ReplaceAll(p.Name, "-", "_"))] = strconv.Itoa(int(p.Port))
			}
			proto := strings.ToLower(string(p.Protocol))
			prefix := fmt.Sprintf("%s_PORT_%d_%s", name, p.Port, strings.ToUpper(proto))
			env[prefix] = fmt.Sprintf("%s://%s:%d", proto, ip, p.Port)
			env[prefix+"_PROTO"] = proto
			env[prefix+"_PORT"] = strconv.Itoa(int(p.Port))
			env[prefix+"_ADDR"] = ip
		}
		first := s.Spec.Ports[0]
		env[name+"_PORT"] = fmt.Sprintf("%s://%s:%d", strings.ToLower(string(first.Protocol)), ip, first.Port)
	}
	return env
}

// servicesIn lists a namespace's Services from the watch (the API when the manager runs
// without one, as in unit tests).
func (m *Manager) servicesIn(ctx context.Context, ns string) ([]*corev1.Service, error) {
	if m.services != nil {
		return m.services.Services(ns).List(labels.Everything())
	}
	list, err := m.client.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := make([]*corev1.Service, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}

// containerEnv resolves a container's environment: service variables (unless disabled),
// envFrom, then env with valueFrom, later entries winning, as upstream.
//
// podIPs are the sandbox's addresses: status.podIP(s) are known from them before the status
// is written.
func (m *Manager) containerEnv(ctx context.Context, pod *corev1.Pod, c corev1.Container, podIPs []string) ([]*runtimeapi.KeyValue, error) {
	env := map[string]string{}
	if pod.Spec.EnableServiceLinks == nil || *pod.Spec.EnableServiceLinks {
		var svcs []*corev1.Service
		for _, ns := range []string{pod.Namespace, metav1.NamespaceDefault} {
			list, err := m.servicesIn(ctx, ns)
			if err != nil {
				return nil, err
			}
			for _, s := range list {
				if ns == pod.Namespace || s.Name == "kubernetes" {
					svcs = append(svcs, s)
				}
			}
			if pod.Namespace == metav1.NamespaceDefault {
				break
			}
		}
		for k, v := range ServiceEnv(svcs) {
			env[k] = v
		}
	}
	for _, from := range c.EnvFrom {
		var data map[string]string
		switch {
		case from.ConfigMapRef != nil:
			cm, err := m.client.CoreV1().ConfigMaps(pod.Namespace).Get(ctx, from.ConfigMapRef.Name, metav1.GetOptions{})
			if err != nil {
				if from.ConfigMapRef.Optional != nil && *from.ConfigMapRef.Optional {
					continue
				}
				return nil, fmt.Errorf("envFrom configmap %q: %w", from.ConfigMapRef.Name, err)
			}
			data = cm.Data
		case from.SecretRef != nil:
			s, err := m.client.CoreV1().Secrets(pod.Namespace).Get(ctx, from.SecretRef.Name, metav1.GetOptions{})
			if err != nil {
				if from.SecretRef.Optional != nil && *from.SecretRef.Optional {
					continue
				}
				return nil, fmt.Errorf("envFrom secret %q: %w", from.SecretRef.Name, err)
			}
			data = map[string]string{}
			for k, v := range s.Data {
				data[k] = string(v)
			}
		}
		for k, v := range data {
			env[from.Prefix+k] = v
		}
	}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			env[e.Name] = expansion.Map(e.Value, env)
			continue
		}
		v, err := m.valueFrom(ctx, pod, c, e.ValueFrom, podIPs)
		if err != nil {
			return nil, fmt.Errorf("env %s: %w", e.Name, err)
		}
		env[e.Name] = v
	}
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]*runtimeapi.KeyValue, 0, len(keys))
	for _, k := range keys {
		out = append(out, &runtimeapi.KeyValue{Key: k, Value: []byte(env[k])})
	}
	return out, nil
}

func (m *Manager) valueFrom(ctx context.Context, pod *corev1.Pod, c corev1.Container, from *corev1.EnvVarSource, podIPs []string) (string, error) {
	switch {
	case from.FieldRef != nil:
		return downward.FieldValue(pod, from.FieldRef.FieldPath, podIPs, m.hostIP())
	case from.ConfigMapKeyRef != nil:
		ref := from.ConfigMapKeyRef
		cm, err := m.client.CoreV1().ConfigMaps(pod.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if err == nil {
			if v, ok := cm.Data[ref.Key]; ok {
				return v, nil
			}
			err = fmt.Errorf("key %q not in configmap %q", ref.Key, ref.Name)
		}
		if ref.Optional != nil && *ref.Optional {
			return "", nil
		}
		return "", err
	case from.SecretKeyRef != nil:
		ref := from.SecretKeyRef
		s, err := m.client.CoreV1().Secrets(pod.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if err == nil {
			if v, ok := s.Data[ref.Key]; ok {
				return string(v), nil
			}
			err = fmt.Errorf("key %q not in secret %q", ref.Key, ref.Name)
		}
		if ref.Optional != nil && *ref.Optional {
			return "", nil
		}
		return "", err
	case from.ResourceFieldRef != nil:
		target := &c
		if name := from.ResourceFieldRef.ContainerName; name != "" && name != c.Name {
			if target = downward.ContainerByName(pod, name); target == nil {
				return "", fmt.Errorf("resourceFieldRef: no container %q", name)
			}
		}
		return downward.ResourceValue(target, from.ResourceFieldRef, m.opts.Allocatable)
	}
	return "", fmt.Errorf("empty valueFrom")
}
