package encryption

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// probe is the Secret rotate-keys writes to see which key the API server encrypts with.
const probeNamespace, probeName = "kube-system", "skiff-encryption-probe"

// RotateKeys is `skiff secrets-encrypt rotate-keys`: a new key goes first in the encryption
// configuration at path, and once the API server (which reloads the file) writes with it,
// every Secret is rewritten with it and the older keys are dropped. say reports each step.
func RotateKeys(ctx context.Context, client kubernetes.Interface, etcd *clientv3.Client, path string, say func(string, ...any)) error {
	cfg, err := Read(path)
	if err != nil {
		return err
	}
	name, err := Rotate(cfg, time.Now())
	if err != nil {
		return err
	}
	if err := Write(path, cfg); err != nil {
		return err
	}
	say("new key %s first in %s", name, path)
	// The API server reloads the file within seconds; the probe's stored value says when.
	deadline := time.Now().Add(time.Minute)
	for {
		if err := writeProbe(ctx, client, name); err != nil {
			return err
		}
		got, err := etcd.Get(ctx, "/registry/secrets/"+probeNamespace+"/"+probeName)
		if err != nil {
			return err
		}
		if len(got.Kvs) == 1 && KeyOf(got.Kvs[0].Value) == name {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the API server did not start writing with %s within a minute (is it running with --secrets-encryption?)", name)
		}
		time.Sleep(time.Second)
	}
	say("the API server encrypts with %s", name)
	secrets, err := client.CoreV1().Secrets("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for i := range secrets.Items {
		s := &secrets.Items[i]
		// An update rewrites the value with the first key (the store writes values read
		// with any other key even when nothing changed).
		if _, err := client.CoreV1().Secrets(s.Namespace).Update(ctx, s, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("rewriting %s/%s: %w", s.Namespace, s.Name, err)
		}
	}
	counts, err := SecretsByKey(ctx, etcd)
	if err != nil {
		return err
	}
	if other := len(secrets.Items) - counts[name]; counts[name] < len(secrets.Items) {
		return fmt.Errorf("%d of %d Secrets are not stored with %s yet; run rotate-keys again (old keys are kept)", other, len(secrets.Items), name)
	}
	say("%d Secrets rewritten with %s", len(secrets.Items), name)
	Prune(cfg)
	if err := Write(path, cfg); err != nil {
		return err
	}
	say("old keys removed; the API server reloads %s", filepath.Base(path))
	return nil
}

func writeProbe(ctx context.Context, client kubernetes.Interface, key string) error {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: probeName, Namespace: probeNamespace},
		StringData: map[string]string{"rotation": key + "@" + time.Now().UTC().Format(time.RFC3339Nano)}}
	_, err := client.CoreV1().Secrets(probeNamespace).Update(ctx, s, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		_, err = client.CoreV1().Secrets(probeNamespace).Create(ctx, s, metav1.CreateOptions{})
	}
	return err
}

// SecretsByKey counts the stored Secrets by the key they are encrypted with ("" for none).
func SecretsByKey(ctx context.Context, etcd *clientv3.Client) (map[string]int, error) {
	resp, err := etcd.Get(ctx, "/registry/secrets/", clientv3.WithPrefix())
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, kv := range resp.Kvs {
		out[KeyOf(kv.Value)]++
	}
	return out, nil
}
