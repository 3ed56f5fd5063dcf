package etcd

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// fakeMembers is a cluster's member list; promote refuses the members in notReady.
type fakeMembers struct {
	members  []*etcdserverpb.Member
	nextID   uint64
	notReady map[uint64]bool
	removed  []uint64
}

func (f *fakeMembers) MemberList(context.Context, ...clientv3.OpOption) (*clientv3.MemberListResponse, error) {
	return &clientv3.MemberListResponse{Members: slices.Clone(f.members)}, nil
}

func (f *fakeMembers) MemberAddAsLearner(_ context.Context, peers []string) (*clientv3.MemberAddResponse, error) {
	f.nextID++
	m := &etcdserverpb.Member{ID: f.nextID, PeerURLs: peers, IsLearner: true}
	f.members = append(f.members, m)
	return &clientv3.MemberAddResponse{Member: m, Members: slices.Clone(f.members)}, nil
}

func (f *fakeMembers) MemberRemove(_ context.Context, id uint64) (*clientv3.MemberRemoveResponse, error) {
	i := slices.IndexFunc(f.members, func(m *etcdserverpb.Member) bool { return m.ID == id })
	if i < 0 {
		return nil, rpctypes.ErrMemberNotFound
	}
	f.members = slices.Delete(f.members, i, i+1)
	f.removed = append(f.removed, id)
	return &clientv3.MemberRemoveResponse{}, nil
}

func (f *fakeMembers) MemberUpdate(_ context.Context, id uint64, peers []string) (*clientv3.MemberUpdateResponse, error) {
	for _, m := range f.members {
		if m.ID == id {
			m.PeerURLs = peers
		}
	}
	return &clientv3.MemberUpdateResponse{}, nil
}

func (f *fakeMembers) MemberPromote(_ context.Context, id uint64) (*clientv3.MemberPromoteResponse, error) {
	if f.notReady[id] {
		return nil, rpctypes.ErrMemberLearnerNotReady
	}
	for _, m := range f.members {
		if m.ID == id {
			m.IsLearner = false
		}
	}
	return &clientv3.MemberPromoteResponse{}, nil
}

func cluster(names ...string) *fakeMembers {
	f := &fakeMembers{notReady: map[uint64]bool{}}
	for _, n := range names {
		f.nextID++
		f.members = append(f.members, &etcdserverpb.Member{ID: f.nextID, Name: n, PeerURLs: []string{"https://" + n + ":2380"}})
	}
	return f
}

func TestAddLearner(t *testing.T) {
	ctx := context.Background()
	f := cluster("a", "b")
	// One added but never started (no name yet): etcd must not be told about it by name.
	if _, err := f.MemberAddAsLearner(ctx, []string{"https://x:2380"}); err != nil {
		t.Fatal(err)
	}
	got, err := AddLearner(ctx, f, "c", "https://c:2380")
	if err != nil {
		t.Fatal(err)
	}
	if want := "a=https://a:2380,b=https://b:2380,c=https://c:2380"; got != want {
		t.Errorf("initial cluster %q, want %q", got, want)
	}
	if m := f.members[len(f.members)-1]; !m.IsLearner {
		t.Error("the new member is not a learner")
	}
	// c joins again after its data was wiped: its old member goes first.
	f.members[len(f.members)-1].Name = "c"
	oldID := f.members[len(f.members)-1].ID
	if _, err := AddLearner(ctx, f, "c", "https://c:2380"); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(f.removed, oldID) {
		t.Errorf("the old member of c (%d) was not removed: removed %v", oldID, f.removed)
	}
	n := 0
	for _, m := range f.members {
		if slices.Contains(m.PeerURLs, "https://c:2380") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d members at c's peer URL, want 1", n)
	}
}

func TestPromoteLearners(t *testing.T) {
	ctx := context.Background()
	f := cluster("a")
	for _, n := range []string{"b", "c", "d"} {
		if _, err := AddLearner(ctx, f, n, "https://"+n+":2380"); err != nil {
			t.Fatal(err)
		}
	}
	f.members[1].Name, f.members[2].Name = "b", "c" // started; d is not
	f.notReady[f.members[2].ID] = true              // c still catching up
	promoted, err := PromoteLearners(ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(promoted, []string{"b"}) {
		t.Errorf("promoted %v, want [b]: c is not ready, d not started", promoted)
	}
	var learners []string
	for _, m := range f.members {
		if m.IsLearner {
			learners = append(learners, strings.TrimPrefix(m.PeerURLs[0], "https://"))
		}
	}
	if !slices.Equal(learners, []string{"c:2380", "d:2380"}) {
		t.Errorf("learners %v, want c and d", learners)
	}
}

func TestRemoveByName(t *testing.T) {
	ctx := context.Background()
	f := cluster("a", "b", "c")
	if removed, err := RemoveByName(ctx, f, "a", "a"); err != nil || removed {
		t.Errorf("a member removed itself: %v %v", removed, err)
	}
	if removed, err := RemoveByName(ctx, f, "b", "a"); err != nil || !removed {
		t.Errorf("b not removed: %v %v", removed, err)
	}
	if removed, err := RemoveByName(ctx, f, "worker-1", "a"); err != nil || removed {
		t.Errorf("a node that is no member removed something: %v %v", removed, err)
	}
	if len(f.members) != 2 {
		t.Errorf("%d members left, want 2", len(f.members))
	}
}

func TestAdvertisePeerURL(t *testing.T) {
	ctx := context.Background()
	f := cluster("a")
	f.members[0].PeerURLs = []string{"https://127.0.0.1:2380"}
	if updated, err := AdvertisePeerURL(ctx, f, "a", "https://10.0.0.1:2380"); err != nil || !updated {
		t.Fatalf("not updated: %v %v", updated, err)
	}
	if got := f.members[0].PeerURLs; !slices.Equal(got, []string{"https://10.0.0.1:2380"}) {
		t.Errorf("peer URLs %v", got)
	}
	if updated, _ := AdvertisePeerURL(ctx, f, "a", "https://10.0.0.1:2380"); updated {
		t.Error("updated again with nothing to change")
	}
}

func TestIsEtcdError(t *testing.T) {
	if !isEtcdError(rpctypes.ErrGRPCLearnerNotReady, rpctypes.ErrMemberLearnerNotReady) {
		t.Error("the gRPC status form is not recognised")
	}
	if !isEtcdError(rpctypes.ErrMemberLearnerNotReady, rpctypes.ErrMemberLearnerNotReady) {
		t.Error("the client's form is not recognised")
	}
	if isEtcdError(errors.New("etcdserver: unhealthy cluster"), rpctypes.ErrMemberLearnerNotReady) {
		t.Error("another error matched")
	}
}
