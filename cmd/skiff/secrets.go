package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
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
			counts, err := encryption.SecretsByKey(cmd.Context(), etcd)
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
			return encryption.RotateKeys(cmd.Context(), client, etcd, path, func(format string, a ...any) { fmt.Fprintf(cmd.OutOrStdout(), format+"\n", a...) })
		}}
	cmd.AddCommand(status, rotate)
	return cmd
}
