package netutil

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestHandler(t *testing.T) {
	srv := httptest.NewServer(Handler())
	defer srv.Close()
	host, _ := os.Hostname()
	for path, want := range map[string]string{"/hostname": host, "/echo?msg=hi%20there": "hi there", "/healthz": "ok"} {
		var out bytes.Buffer
		if err := Fetch(context.Background(), srv.URL+path, 5*time.Second, &out); err != nil || out.String() != want {
			t.Errorf("%s: %q %v, want %q", path, out.String(), err, want)
		}
	}
	var out bytes.Buffer
	if err := Fetch(context.Background(), srv.URL+"/clientip", 5*time.Second, &out); err != nil || !strings.HasPrefix(out.String(), "127.0.0.1:") {
		t.Errorf("/clientip: %q %v", out.String(), err)
	}
	if err := Fetch(context.Background(), srv.URL+"/missing", 5*time.Second, &out); err == nil {
		t.Error("404 reported as success")
	}
}

func freeAddr(t *testing.T, network string) string {
	t.Helper()
	if network == "udp" {
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer pc.Close()
		return pc.LocalAddr().String()
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func TestEchoAndConnect(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, udp := range []bool{false, true} {
		network := "tcp"
		if udp {
			network = "udp"
		}
		addr := freeAddr(t, network)
		go func() { _ = Echo(ctx, addr, udp) }()
		var out bytes.Buffer
		var err error
		for i := 0; i < 50; i++ {
			out.Reset()
			if err = Connect(addr, udp, time.Second, &out); err == nil {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if err != nil {
			t.Fatalf("%s connect: %v", network, err)
		}
		if udp && !strings.Contains(out.String(), "udp answer") {
			t.Errorf("udp: %q", out.String())
		}
		if !udp && !strings.Contains(out.String(), "connected to") {
			t.Errorf("tcp: %q", out.String())
		}
	}
	if err := Connect(freeAddr(t, "tcp"), false, time.Second, &bytes.Buffer{}); err == nil {
		t.Error("connect to a closed port succeeded")
	}
}

func TestMain_CommandLine(t *testing.T) {
	var out, errb bytes.Buffer
	if code := Main([]string{"bogus"}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "unknown command") {
		t.Errorf("bogus: %d %q", code, errb.String())
	}
	if code := Main([]string{"sleep", "10ms"}, &out, &errb); code != 0 {
		t.Errorf("sleep: %d", code)
	}
	errb.Reset()
	if code := Main([]string{"fetch"}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "usage") {
		t.Errorf("fetch without URL: %d %q", code, errb.String())
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr := freeAddr(t, "udp")
	go func() { _ = Echo(ctx, addr, true) }()
	time.Sleep(50 * time.Millisecond)
	out.Reset()
	if code := Main([]string{"connect", addr, "--udp", "--timeout", "2s"}, &out, &errb); code != 0 || !strings.Contains(out.String(), "udp answer") {
		t.Errorf("connect with trailing flags: %d %q %q", code, out.String(), errb.String())
	}
	out.Reset()
	if code := Main([]string{"dns", "localhost"}, &out, &errb); code != 0 || !strings.Contains(out.String(), "127.0.0.1") {
		t.Errorf("dns localhost: %d %q %q", code, out.String(), errb.String())
	}
	file := t.TempDir() + "/sub/id"
	out.Reset()
	if code := Main([]string{"write", file, "web-0"}, &out, &errb); code != 0 {
		t.Errorf("write: %d %q", code, errb.String())
	}
	if code := Main([]string{"cat", file}, &out, &errb); code != 0 || out.String() != "web-0" {
		t.Errorf("cat after write: %d %q", code, out.String())
	}
	fill := t.TempDir() + "/sub/fill"
	if err := Fill(fill, 3); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(fill); err != nil || fi.Size() != 3<<20 {
		t.Errorf("fill 3 MiB: %v %v", fi, err)
	}
	for _, bad := range [][]string{{"fill", fill}, {"fill", fill, "-1"}, {"fill", fill, "ten"}} {
		errb.Reset()
		if code := Main(bad, &out, &errb); code != 1 || !strings.Contains(errb.String(), "fill") {
			t.Errorf("%v: %d %q", bad, code, errb.String())
		}
	}
	for _, bad := range [][]string{{"burn"}, {"burn", "0"}, {"burn", "1001"}, {"burn", "lots"}} {
		errb.Reset()
		if code := Main(bad, &out, &errb); code != 1 || !strings.Contains(errb.String(), "burn") {
			t.Errorf("%v: %d %q", bad, code, errb.String())
		}
	}
}

// TestBurn measures the process's CPU time over a burn of 300 ms at 500 millicores: some
// of it, neither none nor all (the bounds are wide: CI machines are shared).
func TestBurn(t *testing.T) {
	var before, after syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &before)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	Burn(ctx, 500)
	wall := time.Since(start)
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &after)
	cpu := time.Duration(after.Utime.Nano()+after.Stime.Nano()-before.Utime.Nano()-before.Stime.Nano()) * time.Nanosecond
	if share := float64(cpu) / float64(wall); share < 0.05 || share > 0.95 {
		t.Errorf("burning 500m used %v of CPU in %v (%.2f)", cpu, wall, share)
	}
}

func TestProbe(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	var out bytes.Buffer
	if err := Probe(ctx, netip.MustParsePrefix("127.0.0.0/30"), port, 300*time.Millisecond, &out); err != nil {
		t.Fatal(err)
	}
	// Only the listener's address answers, once.
	if f := strings.Fields(out.String()); len(f) != 2 || f[0] != "127.0.0.1" {
		t.Errorf("probe of 127.0.0.0/30: %q", out.String())
	}
	if err := Probe(ctx, netip.MustParsePrefix("10.0.0.0/8"), port, time.Millisecond, &out); err == nil {
		t.Error("a /8 probed")
	}
}

func TestFetchFromPort(t *testing.T) {
	srv := httptest.NewServer(Handler())
	defer srv.Close()
	port := 0
	for i := 0; i < 3; i++ { // the same local port, again and again
		var out bytes.Buffer
		if port == 0 {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			port = l.Addr().(*net.TCPAddr).Port
			l.Close()
		}
		if err := FetchFrom(context.Background(), srv.URL+"/clientip", 5*time.Second, port, &out); err != nil {
			t.Fatalf("fetch %d from port %d: %v", i, port, err)
		}
		if !strings.HasSuffix(out.String(), fmt.Sprintf(":%d", port)) {
			t.Errorf("fetch %d: the server saw %q, want port %d", i, out.String(), port)
		}
	}
}

func TestWebhookHandler(t *testing.T) {
	h := WebhookHandler()
	post := func(path, body string) map[string]any {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, strings.NewReader(body)))
		var out map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			t.Fatalf("%s: %v: %s", path, err, rec.Body.String())
		}
		return out
	}
	review := func(obj string) string {
		return `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u1","object":` + obj + `}}`
	}
	resp := post("/validate", review(`{"kind":"ConfigMap","data":{"forbidden":"x"}}`))["response"].(map[string]any)
	if resp["uid"] != "u1" || resp["allowed"] != false || resp["status"].(map[string]any)["message"] != "the forbidden key is not allowed" {
		t.Errorf("validate forbidden: %v", resp)
	}
	if resp := post("/validate", review(`{"kind":"ConfigMap","data":{"ok":"x"}}`))["response"].(map[string]any); resp["allowed"] != true {
		t.Errorf("validate ok: %v", resp)
	}
	resp = post("/mutate", review(`{"metadata":{"name":"a","labels":{"x":"y"}}}`))["response"].(map[string]any)
	patch, _ := base64.StdEncoding.DecodeString(resp["patch"].(string))
	if resp["patchType"] != "JSONPatch" || string(patch) != `[{"op":"add","path":"/metadata/labels/webhook","value":"mutated"}]` {
		t.Errorf("mutate: %v %s", resp, patch)
	}
	conv := post("/convert", `{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"c1","desiredAPIVersion":"example.com/v2",
		"objects":[{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"color":"red"}}]}}`)["response"].(map[string]any)
	objs := conv["convertedObjects"].([]any)
	w := objs[0].(map[string]any)
	if conv["uid"] != "c1" || w["apiVersion"] != "example.com/v2" || w["spec"].(map[string]any)["colour"] != "red" || w["spec"].(map[string]any)["color"] != nil {
		t.Errorf("convert: %v", conv)
	}
	if _, err := ConvertWidget(json.RawMessage(`{"apiVersion":"other.com/v1"}`), "example.com/v2"); err == nil {
		t.Error("a conversion across groups succeeded")
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/convert", strings.NewReader("garbage")))
	if rec.Code != http.StatusBadRequest {
		t.Errorf("garbage: %d", rec.Code)
	}
}

func TestHold(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	go func() { _ = Echo(ctx, addr, false) }()
	time.Sleep(100 * time.Millisecond)
	holdCtx, stopHold := context.WithTimeout(ctx, 1500*time.Millisecond)
	defer stopHold()
	var out bytes.Buffer
	if err := Hold(holdCtx, addr, 10*time.Millisecond, time.Second, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "; stopped") || !strings.Contains(out.String(), "held ") {
		t.Errorf("output:\n%s", out.String())
	}
	// The server goes: holding a flow to it fails, and says so.
	cancel()
	time.Sleep(100 * time.Millisecond)
	none, stop := context.WithTimeout(context.Background(), 2*time.Second)
	defer stop()
	if err := Hold(none, addr, 10*time.Millisecond, 200*time.Millisecond, &out); err == nil {
		t.Error("holding a flow to nothing succeeded")
	}
}
