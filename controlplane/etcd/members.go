package etcd

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Membership is what changes an embedded cluster's members: the member API of etcd's client
// (clientv3.Cluster), narrowed so the decisions below are tested with a fake.
type Membership interface {
	MemberList(ctx context.Context, opts ...clientv3.OpOption) (*clientv3.MemberListResponse, error)
	MemberAddAsLearner(ctx context.Context, peerAddrs []string) (*clientv3.MemberAddResponse, error)
	MemberRemove(ctx context.Context, id uint64) (*clientv3.MemberRemoveResponse, error)
	MemberUpdate(ctx context.Context, id uint64, peerAddrs []string) (*clientv3.MemberUpdateResponse, error)
	MemberPromote(ctx context.Context, id uint64) (*clientv3.MemberPromoteResponse, error)
}

var _ Membership = clientv3.Cluster(nil)

// AddLearner adds a member that will start as name at peerURL as a learner (a non-voting
// member, so a new server that never comes up cannot cost the cluster its quorum) and returns
// the initial cluster the new member starts with. A member already at peerURL is removed
// first: a server joining again after its data was wiped is a new member to etcd.
func AddLearner(ctx context.Context, m Membership, name, peerURL string) (string, error) {
	list, err := m.MemberList(ctx)
	if err != nil {
		return "", fmt.Errorf("listing etcd members: %w", err)
	}
	for _, mem := range list.Members {
		if slices.Contains(mem.PeerURLs, peerURL) || (mem.Name == name && name != "") {
			if _, err := m.MemberRemove(ctx, mem.ID); err != nil {
				return "", fmt.Errorf("removing the old etcd member %q (%s) before it joins again: %w", mem.Name, peerURL, err)
			}
		}
	}
	resp, err := m.MemberAddAsLearner(ctx, []string{peerURL})
	if err != nil {
		return "", fmt.Errorf("adding etcd learner %q at %s: %w", name, peerURL, err)
	}
	return InitialCluster(resp.Members, resp.Member.ID, name), nil
}

// InitialCluster is the --initial-cluster a member just added (id, to start as name) starts
// with: every started member by its name, and the new one. Members added but not started yet
// have no name and cannot be listed; etcd learns of them from the log.
func InitialCluster(members []*etcdserverpb.Member, id uint64, name string) string {
	var parts []string
	for _, mem := range members {
		n := mem.Name
		if mem.ID == id {
			n = name
		}
		if n == "" {
			continue
		}
		for _, u := range mem.PeerURLs {
			parts = append(parts, n+"="+u)
		}
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

// PromoteLearners promotes every learner that has caught up with the leader and returns
// their names; etcd refuses the others, which stay learners until a later call.
func PromoteLearners(ctx context.Context, m Membership) ([]string, error) {
	list, err := m.MemberList(ctx)
	if err != nil {
		return nil, err
	}
	var promoted []string
	var errs []error
	for _, mem := range list.Members {
		if !mem.IsLearner || mem.Name == "" { // not started yet: nothing to catch up
			continue
		}
		if _, err := m.MemberPromote(ctx, mem.ID); err != nil {
			if !isEtcdError(err, rpctypes.ErrMemberLearnerNotReady) {
				errs = append(errs, fmt.Errorf("promoting %q: %w", mem.Name, err))
			}
			continue
		}
		promoted = append(promoted, mem.Name)
	}
	return promoted, errors.Join(errs...)
}

// RemoveByName removes the member called name unless it is self (a member does not remove
// itself: the others do, as each server watches Nodes) and reports whether it removed one.
func RemoveByName(ctx context.Context, m Membership, name, self string) (bool, error) {
	if name == self {
		return false, nil
	}
	list, err := m.MemberList(ctx)
	if err != nil {
		return false, err
	}
	for _, mem := range list.Members {
		if mem.Name != name {
			continue
		}
		if _, err := m.MemberRemove(ctx, mem.ID); err != nil && !isEtcdError(err, rpctypes.ErrMemberNotFound) {
			return false, fmt.Errorf("removing etcd member %q: %w", name, err)
		}
		return true, nil
	}
	return false, nil
}

// AdvertisePeerURL makes the member called self advertise peerURL: a server that ran alone
// (its peers on loopback) and is restarted with --cluster-init.
func AdvertisePeerURL(ctx context.Context, m Membership, self, peerURL string) (bool, error) {
	list, err := m.MemberList(ctx)
	if err != nil {
		return false, err
	}
	for _, mem := range list.Members {
		if mem.Name != self || slices.Equal(mem.PeerURLs, []string{peerURL}) {
			continue
		}
		if _, err := m.MemberUpdate(ctx, mem.ID, []string{peerURL}); err != nil {
			return false, fmt.Errorf("advertising %s for etcd member %q: %w", peerURL, self, err)
		}
		return true, nil
	}
	return false, nil
}

// PromoteInterval is how often a server looks for learners to promote.
const PromoteInterval = 2 * time.Second

// isEtcdError says whether err is etcd's error target, as the client returns it or as the
// gRPC status it came in.
func isEtcdError(err, target error) bool {
	return errors.Is(err, target) || errors.Is(rpctypes.Error(err), target)
}
