package metrics

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"time"
)

// DefaultResolution is how often each node is scraped, metrics-server's default
// (--metric-resolution).
const DefaultResolution = 15 * time.Second

// Target is one node agent to scrape.
type Target struct {
	Node      string
	URL       *url.URL // the agent API's base URL
	Transport http.RoundTripper
}

// Scraper reads every node's /metrics/resource into a Store, one resolution period apart.
type Scraper struct {
	Store *Store
	// Targets lists the nodes to scrape now.
	Targets    func(ctx context.Context) ([]Target, error)
	Resolution time.Duration
	Log        *slog.Logger

	mu     sync.Mutex
	failed map[string]string // node → why its last scrape failed
}

// Run scrapes until ctx ends. A node that cannot be scraped is logged when it starts and
// stops failing; its metrics age out (two scrapes are needed for a rate).
func (s *Scraper) Run(ctx context.Context) error {
	res := s.Resolution
	if res <= 0 {
		res = DefaultResolution
	}
	t := time.NewTicker(res)
	defer t.Stop()
	for {
		s.scrapeAll(ctx, res)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func (s *Scraper) scrapeAll(ctx context.Context, res time.Duration) {
	targets, err := s.Targets(ctx)
	if err != nil {
		s.Log.Warn("metrics: cannot list nodes", "err", err)
		return
	}
	keep := map[string]bool{}
	var wg sync.WaitGroup
	for _, tg := range targets {
		keep[tg.Node] = true
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A node must answer within the period, or it would fall a period behind.
			ctx, cancel := context.WithTimeout(ctx, res*9/10)
			defer cancel()
			sc, err := scrape(ctx, tg)
			s.report(tg.Node, err)
			if err == nil {
				s.Store.Ingest(tg.Node, sc)
			} else {
				// No stale sample may pair with the next good one across the gap.
				s.Store.Ingest(tg.Node, Scrape{})
			}
		}()
	}
	wg.Wait()
	s.Store.Retain(keep)
}

func (s *Scraper) report(node string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failed == nil {
		s.failed = map[string]string{}
	}
	prev, was := s.failed[node]
	switch {
	case err != nil && (!was || prev != err.Error()):
		s.failed[node] = err.Error()
		s.Log.Warn("metrics: cannot scrape node", "node", node, "err", err)
	case err == nil && was:
		delete(s.failed, node)
		s.Log.Info("metrics: node scraped again", "node", node)
	}
}

func scrape(ctx context.Context, tg Target) (Scrape, error) {
	u := tg.URL.JoinPath("/metrics/resource")
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return Scrape{}, err
	}
	client := &http.Client{Transport: tg.Transport}
	// A target's transport is made for this scrape; its connection is not kept for the next.
	defer client.CloseIdleConnections()
	resp, err := client.Do(req)
	if err != nil {
		return Scrape{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return Scrape{}, fmt.Errorf("%s: %s: %s", u, resp.Status, body)
	}
	// 16 MiB is far above a node's worth of containers; a larger body is not an agent's.
	return Parse(io.LimitReader(resp.Body, 16<<20), time.Now())
}
