package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/skiff-sh/skiff/controlplane/etcd"
	"github.com/skiff-sh/skiff/internal/layout"
	"github.com/skiff-sh/skiff/system"
)

// etcdSnapshotCommand is k3s's `etcd-snapshot`: save a consistent snapshot of the embedded
// etcd, list them, and restore one into a stopped server's data dir.
func etcdSnapshotCommand() *cobra.Command {
	var dataDir, dir string
	var clientPort, peerPort int
	cmd := &cobra.Command{Use: "etcd-snapshot", Short: "Snapshots of the embedded etcd: save, ls, restore"}
	cmd.PersistentFlags().StringVar(&dataDir, "data-dir", layout.ServerDir, "the server's data directory")
	cmd.PersistentFlags().StringVar(&dir, "dir", "", "where snapshots are kept (default <data-dir>/db/snapshots)")
	cmd.PersistentFlags().IntVar(&clientPort, "etcd-client-port", system.DefaultServer().EtcdClientPort, "the embedded etcd's client port (the server's --etcd-client-port)")
	cmd.PersistentFlags().IntVar(&peerPort, "etcd-peer-port", system.DefaultServer().EtcdPeerPort, "the embedded etcd's peer port (the server's --etcd-peer-port)")
	snapshots := func() string {
		if dir == "" {
			return layout.Server{Dir: dataDir}.Snapshots()
		}
		return dir
	}
	clientURL := func() string { return "https://127.0.0.1:" + strconv.Itoa(clientPort) }
	var name string
	save := &cobra.Command{Use: "save", Short: "Save a snapshot of the running server's etcd", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			host, _ := os.Hostname()
			path := filepath.Join(snapshots(), etcd.SnapshotName(name, host, time.Now()))
			version, err := etcd.Save(cmd.Context(), clientURL(), layout.Server{Dir: dataDir}.PKI(), path)
			if err != nil {
				return err
			}
			fi, err := os.Stat(path)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Snapshot %s saved (%d bytes, etcd %s)\n", path, fi.Size(), version)
			return nil
		}}
	save.Flags().StringVar(&name, "name", "on-demand", "the snapshot's name prefix")
	ls := &cobra.Command{Use: "ls", Aliases: []string{"list"}, Short: "List the saved snapshots", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			entries, err := os.ReadDir(snapshots())
			if os.IsNotExist(err) {
				return nil
			}
			if err != nil {
				return err
			}
			sort.Slice(entries, func(i, j int) bool { return entries[i].Name() < entries[j].Name() })
			fmt.Fprintf(cmd.OutOrStdout(), "%-60s %12s %s\n", "NAME", "SIZE", "CREATED")
			for _, e := range entries {
				if fi, err := e.Info(); err == nil && !e.IsDir() {
					fmt.Fprintf(cmd.OutOrStdout(), "%-60s %12d %s\n", filepath.Join(snapshots(), e.Name()), fi.Size(), fi.ModTime().UTC().Format(time.RFC3339))
				}
			}
			return nil
		}}
	var member string
	restore := &cobra.Command{Use: "restore SNAPSHOT", Short: "Restore a snapshot into the (stopped) server's data dir; the old data is kept aside", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			old, err := etcd.Restore(args[0], layout.Server{Dir: dataDir}.Etcd(), member, "https://127.0.0.1:"+strconv.Itoa(peerPort), clientURL(), time.Now())
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Restored %s into %s", args[0], layout.Server{Dir: dataDir}.Etcd())
			if old != "" {
				fmt.Fprintf(cmd.OutOrStdout(), " (the previous data is in %s)", old)
			}
			fmt.Fprintln(cmd.OutOrStdout(), "; start skiff server again.")
			return nil
		}}
	restore.Flags().StringVar(&member, "etcd-name", "", "the member's name (default: the host name, as skiff server uses)")
	cmd.AddCommand(save, ls, restore)
	return cmd
}
