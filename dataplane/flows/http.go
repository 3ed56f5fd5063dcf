package flows

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// Response is one line of /flows: a flow, or how many flows a follower lost (Hubble's
// GetFlowsResponse has the same two shapes).
type Response struct {
	Flow       *Flow       `json:"flow,omitempty"`
	LostEvents *LostEvents `json:"lost_events,omitempty"`
}

// LostEvents says flows were lost on the way to this reader.
type LostEvents struct {
	Source string `json:"source"`
	Num    uint64 `json:"num_events_lost"`
}

// Handler serves GET /flows: the newest flows (last=N, 20 by default, 0 when following) that
// the filter in the query picks, then with follow=true every new one as it comes, one JSON
// object per line.
func (o *Observer) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		filter, err := ParseFilter(q)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		follow := false
		if s := q.Get("follow"); s != "" {
			if follow, err = strconv.ParseBool(s); err != nil {
				http.Error(w, fmt.Sprintf("follow %q: want true or false", s), http.StatusBadRequest)
				return
			}
		}
		last := 20
		if follow {
			last = 0
		}
		if s := q.Get("last"); s != "" {
			if last, err = strconv.Atoi(s); err != nil || last < 0 {
				http.Error(w, fmt.Sprintf("last %q: want a number of flows, 0 or more", s), http.StatusBadRequest)
				return
			}
		}
		// Followed before the last ones are read: nothing falls between the two.
		var (
			ch     <-chan Flow
			lost   func() uint64
			cancel = func() {}
		)
		if follow {
			ch, lost, cancel = o.Follow(filter)
		}
		defer cancel()
		w.Header().Set("Content-Type", "application/x-ndjson")
		enc := json.NewEncoder(w)
		flusher, _ := w.(http.Flusher)
		flush := func() {
			if flusher != nil {
				flusher.Flush()
			}
		}
		for _, f := range o.Last(last, filter) {
			if err := enc.Encode(Response{Flow: &f}); err != nil {
				return
			}
		}
		flush()
		if !follow {
			return
		}
		reported := uint64(0)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-r.Context().Done():
				return
			case f := <-ch:
				if err := enc.Encode(Response{Flow: &f}); err != nil {
					return
				}
				// Write what is waiting too, then flush once.
				for more := true; more; {
					select {
					case f := <-ch:
						if err := enc.Encode(Response{Flow: &f}); err != nil {
							return
						}
					default:
						more = false
					}
				}
				flush()
			case <-tick.C:
				if n := lost(); n > reported {
					if err := enc.Encode(Response{LostEvents: &LostEvents{Source: "follower", Num: n - reported}}); err != nil {
						return
					}
					reported = n
					flush()
				}
			}
		}
	})
}
