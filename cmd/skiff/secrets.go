package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/skiff-sh/skiff/controlplane/encryption"
	"github.com/skiff-sh/skiff/internal/layout"
	"github.com/skiff-sh/skiff/system"
)

// secretsEncryptCommand is k3s's `secrets-encrypt`: status, and rotate-keys, which puts a
// new key in front, rewrites every Secret with it and drops the old ones, while the API
// server keeps serving (it reloads the configuration).
func secretsEncryptCommand() *cobra.Command {
	var dataDir, kubeconfig, etcdEndpoint string
	cmd := &cobra.Command{Use: "secrets-encrypt", Short: "Secrets encryption at rest: status and key rotation (with skiff server --secrets-encryption)"}
	cmd.PersistentFlags().StringVar(&dataDir, "data-dir", layout.ServerDir, "the server's data directory (its cred/ and pki/)")
	cmd.PersistentFlags().StringVar(&kubeconfig, "kubeconfig", "", "admin kubeconfig (default <data-dir>/admin.kubeconfig)")
	cmd.PersistentFlags().StringVar(&etcdEndpoint, "etcd-endpoint", "https://127.0.0.1:"+strconv.Itoa(system.DefaultServer().EtcdClientPort), "etcd client URL, to read how values are stored")
	open := func() (kubernetes.Interface, *clientv3.Client, string, error) {
		if kubeconfig == "" {
			kubeconfig = layout.Server{Dir: dataDir}.Kubeconfig("admin")
		}
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return nil, nil, "", err
		}
		client, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return nil, nil, "", err
		}
		p := layout.Server{Dir: dataDir}.PKI()
		tlsCfg, err := transport.TLSInfo{CertFile: p.APIServerEtcdClient().Cert, KeyFile: p.APIServerEtcdClient().Key, TrustedCAFile: p.EtcdCA().Cert}.ClientConfig()
		if err != nil {
			return nil, nil, "", err
		}
		etcd, err := clientv3.New(clientv3.Config{Endpoints: []string{etcdEndpoint}, TLS: tlsCfg, DialTimeout: 10 * time.Second})
		if err != nil {
			return nil, nil, "", err
		}
		return client, etcd, layout.Server{Dir: dataDir}.EncryptionConfig(), nil
	}
	status := &cobra.Command{Use: "status", Short: "The keys, and how many Secrets each encrypts", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, etcd, path, err := open()
			if err != nil {
				return err
			}
			defer etcd.Close()
			cfg, err := encryption.Read(path)
			if err != nil {
				return err
			}
			keys := encryption.Keys(cfg)
			fmt.Fprintf(cmd.OutOrStdout(), "Encryption config: %s\nActive key: %s\n", path, keys[0])
			if len(keys) > 1 {
				fmt.Fprintf(cmd.OutOrStdout(), "Older keys (still decrypting): %s\n", strings.Join(keys[1:], ", "))
			}
			counts, err := secretsByKey(cmd.Context(), etcd)
			if err != nil {
				return err
			}
			for k, n := range counts {
				if k == "" {
					k = "not encrypted"
				}
				fmt.Fprintf(cmd.OutOrStdout(), "Secrets stored with %s: %d\n", k, n)
			}
			return nil
		}}
	rotate := &cobra.Command{Use: "rotate-keys", Short: "Encrypt every Secret with a new key, then drop the old ones", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			client, etcd, path, err := open()
			if err != nil {
				return err
			}
			defer etcd.Close()
			return rotateKeys(cmd.Context(), client, etcd, path, func(format string, a ...any) { fmt.Fprintf(cmd.OutOrStdout(), format+"\n", a...) })
		}}
	cmd.AddCommand(status, rotate)
	return cmd
}

// probe is the Secret rotate-keys writes to see which key the API server encrypts with.
const probeNamespace, probeName = "kube-system", "skiff-encryption-probe"

func rotateKeys(ctx context.Context, client kubernetes.Interface, etcd *clientv3.Client, path string, say func(string, ...any)) error {
	cfg, err := encryption.Read(path)
	if err != nil {
		return err
	}
	name, err := encryption.Rotate(cfg, time.Now())
	if err != nil {
		return err
	}
	if err := encryption.Write(path, cfg); err != nil {
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
		if len(got.Kvs) == 1 && encryption.KeyOf(got.Kvs[0].Value) == name {
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
	counts, err := secretsByKey(ctx, etcd)
	if err != nil {
		return err
	}
	if other := len(secrets.Items) - counts[name]; counts[name] < len(secrets.Items) {
		return fmt.Errorf("%d of %d Secrets are not stored with %s yet; run rotate-keys again (old keys are kept)", other, len(secrets.Items), name)
	}
	say("%d Secrets rewritten with %s", len(secrets.Items), name)
	encryption.Prune(cfg)
	if err := encryption.Write(path, cfg); err != nil {
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

// secretsByKey counts the stored Secrets by the key they are encrypted with ("" for none).
func secretsByKey(ctx context.Context, etcd *clientv3.Client) (map[string]int, error) {
	resp, err := etcd.Get(ctx, "/registry/secrets/", clientv3.WithPrefix())
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, kv := range resp.Kvs {
		out[encryption.KeyOf(kv.Value)]++
	}
	return out, nil
}
