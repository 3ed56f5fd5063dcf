package storage

import (
	"context"
	"crypto/tls"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/kubernetes"
	"go.uber.org/zap"
	"google.golang.org/grpc/connectivity"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/etcd3"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/apiserver/pkg/storage/storagebackend/factory"
	"k8s.io/apiserver/pkg/storage/value/encrypt/identity"
)

// Upstream's etcd client settings (k8s.io/apiserver storagebackend/factory).
const (
	dialTimeout      = 20 * time.Second
	keepaliveTime    = 30 * time.Second
	keepaliveTimeout = 10 * time.Second
)

// sharedClients holds one etcd client per transport (endpoints and TLS files) for every
// resource's storage.
//
// Why: upstream's storage factory dials etcd anew for each resource — some sixty gRPC
// connections in one skiff server, each with its TLS session, HTTP/2 buffers and a dozen
// goroutines at both ends (the embedded etcd is in the same process). One connection
// carries them all: etcd multiplexes the watches of a client onto one stream.
var sharedClients = struct {
	sync.Mutex
	m map[string]*sharedClient
}{m: map[string]*sharedClient{}}

type sharedClient struct {
	client    *kubernetes.Client
	compactor etcd3.Compactor
	refs      int
	stop      func()
}

// acquire returns the transport's shared client (dialling it on first use) and the
// function that releases it; the last release closes it.
func acquire(c storagebackend.TransportConfig, compactionInterval time.Duration) (*sharedClient, func(), error) {
	key := fmt.Sprintf("%v|%s|%s|%s", c.ServerList, c.CertFile, c.KeyFile, c.TrustedCAFile)
	sharedClients.Lock()
	defer sharedClients.Unlock()
	sc, ok := sharedClients.m[key]
	if !ok {
		client, err := dial(c)
		if err != nil {
			return nil, nil, err
		}
		// Every store reads through KV: track its latency as upstream does (once, here).
		client.KV = etcd3.NewETCDLatencyTracker(client.KV)
		sc = &sharedClient{client: client, stop: func() {}}
		sharedClients.m[key] = sc
	}
	if compactionInterval > 0 && sc.compactor == nil {
		// One compactor per cluster, as upstream (keyed by endpoint), started by the first
		// store that asks for compaction.
		comp := etcd3.StartCompactorPerEndpoint(sc.client.Client, compactionInterval)
		sc.compactor, sc.stop = comp, comp.Stop
	}
	sc.refs++
	var once sync.Once
	return sc, func() {
		once.Do(func() {
			sharedClients.Lock()
			defer sharedClients.Unlock()
			sc.refs--
			if sc.refs == 0 {
				sc.stop()
				_ = sc.client.Close()
				delete(sharedClients.m, key)
			}
		})
	}, nil
}

// Client is the transport's shared etcd client, for skiff's own keys (the allocators'
// ranges, the API servers' leases) beside the stores', and the function that releases it.
func Client(c storagebackend.TransportConfig) (*clientv3.Client, func(), error) {
	sc, release, err := acquire(c, 0)
	if err != nil {
		return nil, nil, err
	}
	return sc.client.Client, release, nil
}

// dial makes an etcd client as upstream's storage factory does (TLS from the transport's
// files, its keepalives), and waits for the connection.
func dial(c storagebackend.TransportConfig) (*kubernetes.Client, error) {
	tlsInfo := transport.TLSInfo{CertFile: c.CertFile, KeyFile: c.KeyFile, TrustedCAFile: c.TrustedCAFile}
	tlsConfig, err := tlsInfo.ClientConfig()
	if err != nil {
		return nil, err
	}
	tlsConfig.MinVersion = tls.VersionTLS12
	if c.CertFile == "" && c.KeyFile == "" && c.TrustedCAFile == "" {
		tlsConfig = nil
	}
	client, err := kubernetes.New(clientv3.Config{
		Endpoints:            c.ServerList,
		TLS:                  tlsConfig,
		DialTimeout:          dialTimeout,
		DialKeepAliveTime:    keepaliveTime,
		DialKeepAliveTimeout: keepaliveTimeout,
		Logger:               zap.NewNop(),
	})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), dialTimeout)
	defer cancel()
	conn := client.ActiveConnection()
	for {
		state := conn.GetState()
		if state == connectivity.Ready {
			return client, nil
		}
		if state == connectivity.Idle {
			conn.Connect()
		}
		if !conn.WaitForStateChange(ctx, state) {
			_ = client.Close()
			return nil, fmt.Errorf("etcd %v not ready: %w", c.ServerList, ctx.Err())
		}
	}
}

// newRawStorage is generic.NewRawStorage over the transport's shared client: upstream's
// etcd3 store, with its latency tracking, transformer (encryption at rest) and decoder.
func newRawStorage(c *storagebackend.ConfigForResource, newFunc, newListFunc func() runtime.Object, resourcePrefix string) (storage.Interface, factory.DestroyFunc, error) {
	if c.Type != storagebackend.StorageTypeUnset && c.Type != storagebackend.StorageTypeETCD3 {
		return nil, nil, fmt.Errorf("unsupported storage type %q", c.Type)
	}
	sc, release, err := acquire(c.Transport, c.CompactionInterval)
	if err != nil {
		return nil, nil, err
	}
	transformer := c.Transformer
	if transformer == nil {
		transformer = identity.NewEncryptCheckTransformer()
	}
	versioner := storage.APIObjectVersioner{}
	store, err := etcd3.New(sc.client, sc.compactor, c.Codec, newFunc, newListFunc, c.Prefix, resourcePrefix, c.GroupResource,
		transformer, c.LeaseManagerConfig, etcd3.NewDefaultDecoder(c.Codec, versioner), versioner)
	if err != nil {
		release()
		return nil, nil, err
	}
	var once sync.Once
	return store, func() {
		once.Do(func() {
			store.Close()
			release()
		})
	}, nil
}
