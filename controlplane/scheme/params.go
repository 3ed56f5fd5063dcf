package scheme

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/conversion"
	"k8s.io/apimachinery/pkg/runtime"
)

// addParameterConversions decodes the query parameters of pods/log, exec, portforward and proxy
// and services/proxy into their options (upstream generates these inside k8s.io/kubernetes).
func addParameterConversions(s *runtime.Scheme) error {
	if err := s.AddConversionFunc((*url.Values)(nil), (*corev1.PodLogOptions)(nil), func(a, b any, _ conversion.Scope) error {
		return PodLogOptionsFromQuery(*a.(*url.Values), b.(*corev1.PodLogOptions))
	}); err != nil {
		return err
	}
	if err := s.AddConversionFunc((*url.Values)(nil), (*corev1.PodExecOptions)(nil), func(a, b any, _ conversion.Scope) error {
		return PodExecOptionsFromQuery(*a.(*url.Values), b.(*corev1.PodExecOptions))
	}); err != nil {
		return err
	}
	// pods/proxy and services/proxy: ?path= (the URL's rest arrives as the path parameter).
	if err := s.AddConversionFunc((*url.Values)(nil), (*corev1.PodProxyOptions)(nil), func(a, b any, _ conversion.Scope) error {
		b.(*corev1.PodProxyOptions).Path = (*a.(*url.Values)).Get("path")
		return nil
	}); err != nil {
		return err
	}
	if err := s.AddConversionFunc((*url.Values)(nil), (*corev1.ServiceProxyOptions)(nil), func(a, b any, _ conversion.Scope) error {
		b.(*corev1.ServiceProxyOptions).Path = (*a.(*url.Values)).Get("path")
		return nil
	}); err != nil {
		return err
	}
	if err := s.AddConversionFunc((*url.Values)(nil), (*corev1.PodAttachOptions)(nil), func(a, b any, _ conversion.Scope) error {
		return PodAttachOptionsFromQuery(*a.(*url.Values), b.(*corev1.PodAttachOptions))
	}); err != nil {
		return err
	}
	if err := s.AddConversionFunc((*url.Values)(nil), (*corev1.NodeProxyOptions)(nil), func(a, b any, _ conversion.Scope) error {
		b.(*corev1.NodeProxyOptions).Path = (*a.(*url.Values)).Get("path")
		return nil
	}); err != nil {
		return err
	}
	return s.AddConversionFunc((*url.Values)(nil), (*corev1.PodPortForwardOptions)(nil), func(a, b any, _ conversion.Scope) error {
		o := b.(*corev1.PodPortForwardOptions)
		for _, v := range (*a.(*url.Values))["ports"] {
			for _, p := range strings.Split(v, ",") {
				n, err := strconv.ParseInt(strings.TrimSpace(p), 10, 32)
				if err != nil || n < 1 || n > 65535 {
					return fmt.Errorf("ports: %q is not a port number", p)
				}
				o.Ports = append(o.Ports, int32(n))
			}
		}
		return nil
	})
}

// PodExecOptionsFromQuery parses ?command=...&container=&stdin=&stdout=&stderr=&tty=.
func PodExecOptionsFromQuery(q url.Values, o *corev1.PodExecOptions) error {
	o.Container = q.Get("container")
	o.Command = q["command"]
	for name, dst := range map[string]*bool{"stdin": &o.Stdin, "stdout": &o.Stdout, "stderr": &o.Stderr, "tty": &o.TTY} {
		if v := q.Get(name); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return fmt.Errorf("%s: %q is not a boolean", name, v)
			}
			*dst = b
		}
	}
	if len(o.Command) == 0 {
		return fmt.Errorf("command: at least one argument is required")
	}
	return nil
}

// PodAttachOptionsFromQuery parses ?container=&stdin=&stdout=&stderr=&tty=.
func PodAttachOptionsFromQuery(q url.Values, o *corev1.PodAttachOptions) error {
	o.Container = q.Get("container")
	for name, dst := range map[string]*bool{"stdin": &o.Stdin, "stdout": &o.Stdout, "stderr": &o.Stderr, "tty": &o.TTY} {
		if v := q.Get(name); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return fmt.Errorf("%s: %q is not a boolean", name, v)
			}
			*dst = b
		}
	}
	return nil
}

// PodLogOptionsFromQuery parses ?container=&follow=&previous=&sinceSeconds=&sinceTime=
// &timestamps=&tailLines=&limitBytes=, with a precise error for a malformed value.
func PodLogOptionsFromQuery(q url.Values, o *corev1.PodLogOptions) error {
	boolean := func(name string, dst *bool) error {
		if v := q.Get(name); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return fmt.Errorf("%s: %q is not a boolean", name, v)
			}
			*dst = b
		}
		return nil
	}
	integer := func(name string) (*int64, error) {
		v := q.Get(name)
		if v == "" {
			return nil, nil
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: %q is not an integer", name, v)
		}
		return &n, nil
	}
	o.Container = q.Get("container")
	for name, dst := range map[string]*bool{"follow": &o.Follow, "previous": &o.Previous, "timestamps": &o.Timestamps,
		"insecureSkipTLSVerifyBackend": &o.InsecureSkipTLSVerifyBackend} {
		if err := boolean(name, dst); err != nil {
			return err
		}
	}
	var err error
	if o.SinceSeconds, err = integer("sinceSeconds"); err != nil {
		return err
	}
	if o.TailLines, err = integer("tailLines"); err != nil {
		return err
	}
	if o.LimitBytes, err = integer("limitBytes"); err != nil {
		return err
	}
	if v := q.Get("sinceTime"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return fmt.Errorf("sinceTime: %q is not an RFC 3339 time", v)
		}
		mt := metav1.NewTime(t)
		o.SinceTime = &mt
	}
	return nil
}
