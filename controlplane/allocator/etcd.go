package allocator

import (
	"context"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// EtcdStore keeps one key per reserved value; Reserve is a create-if-absent transaction.
type EtcdStore struct {
	Client *clientv3.Client
}

// Reserve implements Store.
func (s EtcdStore) Reserve(ctx context.Context, key, owner string) (bool, error) {
	resp, err := s.Client.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, owner)).
		Commit()
	if err != nil {
		return false, err
	}
	return resp.Succeeded, nil
}

// Release implements Store.
func (s EtcdStore) Release(ctx context.Context, key string) error {
	_, err := s.Client.Delete(ctx, key)
	return err
}
