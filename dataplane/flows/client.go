package flows

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"sync"

	"k8s.io/client-go/rest"
)

// What `skiff observe` does, through the API server: each node's /flows is read by the
// node proxy (nodes/proxy, so RBAC decides who may), and the nodes' flows are merged by time.

// request is GET /api/v1/nodes/<node>/proxy/flows with the filter and the counts.
func request(rc rest.Interface, node string, filter Filter, last int, follow bool) *rest.Request {
	req := rc.Get().AbsPath("/api/v1/nodes", node, "proxy", "flows").Param("last", strconv.Itoa(last))
	if follow {
		req = req.Param("follow", "true")
	}
	for k, vs := range filter.Query() {
		for _, v := range vs {
			req = req.Param(k, v)
		}
	}
	return req
}

// Fetch reads the newest flows of each node and returns the newest last of them all,
// oldest first; a node that cannot be read is an error naming it (the others still count).
func Fetch(ctx context.Context, rc rest.Interface, nodes []string, filter Filter, last int) ([]Flow, []error) {
	var (
		mu   sync.Mutex
		all  []Flow
		errs []error
		wg   sync.WaitGroup
	)
	for _, node := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var got []Flow
			err := stream(ctx, request(rc, node, filter, last, false), func(r Response) {
				if r.Flow != nil {
					got = append(got, *r.Flow)
				}
			})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("node %s: %w", node, err))
			}
			all = append(all, got...)
		}()
	}
	wg.Wait()
	return Newest(all, last), errs
}

// Newest is the newest n flows, oldest first.
func Newest(all []Flow, n int) []Flow {
	sort.SliceStable(all, func(i, j int) bool { return all[i].Time.Before(all[j].Time) })
	if len(all) > n {
		all = all[len(all)-n:]
	}
	return all
}

// Follow writes each node's new flows to out as they come (out is called from one goroutine
// at a time) until ctx ends or every node's stream does; a node whose stream fails is
// reported through out as lost events naming it, and the others go on.
func Follow(ctx context.Context, rc rest.Interface, nodes []string, filter Filter, last int, out func(node string, r Response)) []error {
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	for _, node := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := stream(ctx, request(rc, node, filter, last, true), func(r Response) {
				mu.Lock()
				defer mu.Unlock()
				out(node, r)
			})
			if err != nil && ctx.Err() == nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("node %s: %w", node, err))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errs
}

// stream reads the JSON lines of one node's /flows.
func stream(ctx context.Context, req *rest.Request, each func(Response)) error {
	body, err := req.Stream(ctx)
	if err != nil {
		return err
	}
	defer body.Close()
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		var r Response
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return fmt.Errorf("reading flows: %w", err)
		}
		each(r)
	}
	if err := sc.Err(); err != nil && err != io.EOF && ctx.Err() == nil {
		return err
	}
	return nil
}
