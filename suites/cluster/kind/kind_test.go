package kind

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/e2e-framework/pkg/env"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/types"

	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/rigs/relay"
	"github.com/aether-mesh/aether/suites/cluster"
)

// The lifecycle tests re-run this test binary with envHelper set; its
// TestMain then drives run() with steps that record themselves in the file
// envMarks names instead of touching a container engine.
const (
	envHelper = "AETHER_KIND_TEST_HELPER"
	envMarks  = "AETHER_KIND_TEST_MARKS"
)

func mark(what string) {
	f, err := os.OpenFile(os.Getenv(envMarks), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		panic(err)
	}
	defer f.Close()
	fmt.Fprintln(f, what)
}

func step(name string, err error) types.EnvFunc {
	return func(ctx context.Context, _ *envconf.Config) (context.Context, error) {
		mark(name)
		return ctx, err
	}
}

func TestMain(m *testing.M) {
	finish := []types.EnvFunc{step("export-logs", nil), step("destroy", nil)}
	switch os.Getenv(envHelper) {
	case "":
		os.Exit(m.Run())
	case "setup-fails":
		os.Exit(run(m, env.New(), []types.EnvFunc{step("create", nil), step("load-images", errors.New("ctr import failed"))}, finish))
	case "setup-ok":
		os.Exit(run(m, env.New(), []types.EnvFunc{step("create", nil), step("load-images", nil)}, finish))
	case "finish-fails":
		os.Exit(run(m, env.New(), []types.EnvFunc{step("create", nil)},
			[]types.EnvFunc{step("export-logs", errors.New("no space left")), step("destroy", nil)}))
	}
	os.Exit(3)
}

// TestHelperSuite stands for a suite's tests in the helper runs.
func TestHelperSuite(t *testing.T) {
	if os.Getenv(envHelper) != "" {
		mark("test")
	}
}

func lifecycle(t *testing.T, mode string) (marks string, code int, out string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "marks")
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperSuite$")
	cmd.Env = append(os.Environ(), envHelper+"="+mode, envMarks+"="+file)
	b, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	m, _ := os.ReadFile(file)
	return strings.Join(strings.Fields(string(m)), ","), cmd.ProcessState.ExitCode(), string(b)
}

func TestSetupFailureRunsNoTestAndStillFinishes(t *testing.T) {
	marks, code, out := lifecycle(t, "setup-fails")
	if marks != "create,load-images,export-logs,destroy" || code == 0 {
		t.Fatalf("steps %q, exit %d; want no test, logs exported then the cluster destroyed, and a failure\n%s", marks, code, out)
	}
	if !strings.Contains(out, "ctr import failed; no test runs") {
		t.Fatalf("the setup failure is not reported:\n%s", out)
	}
}

// The positive control: with setup passing, the tests run between setup
// and finish, and the run passes.
func TestSetupSuccessRunsTheTestsBeforeFinish(t *testing.T) {
	marks, code, out := lifecycle(t, "setup-ok")
	if marks != "create,load-images,test,export-logs,destroy" || code != 0 {
		t.Fatalf("steps %q, exit %d\n%s", marks, code, out)
	}
}

// The framework only logs a finish step's error; a cluster whose logs were
// not exported (or that was not deleted) must still fail the run.
func TestFinishFailureFailsThePassingRun(t *testing.T) {
	marks, code, out := lifecycle(t, "finish-fails")
	if marks != "create,test,export-logs,destroy" || code == 0 || !strings.Contains(out, "no space left") {
		t.Fatalf("steps %q, exit %d\n%s", marks, code, out)
	}
}

func TestParseRecordsSkipsTheProgramsOwnLines(t *testing.T) {
	log := `{"event":"ready","time":"2026-01-01T00:00:00Z","udp":[7000]}
aether-node: some message on stderr
{"event":"udp","time":"2026-01-01T00:00:01Z","port":7000,"src":"10.244.1.1:4000","payload":"t/0"}
`
	recs, err := parseRecords([]byte(log), cluster.Pod{Namespace: "demo", Name: "a-0"})
	if err != nil || len(recs) != 2 || recs[1].Payload != "t/0" || recs[1].Port != 7000 {
		t.Fatalf("records %+v, %v", recs, err)
	}
	if _, err := parseRecords([]byte(`{"event":"udp","port":"x"}`+"\n"), cluster.Pod{Namespace: "demo", Name: "a-0"}); err == nil || !strings.Contains(err.Error(), "demo/a-0") {
		t.Fatalf("a broken record line: %v", err)
	}
}

// A streamConn driving a relay (rigs/relay) over pipes, as it does over an
// exec stream: datagrams keep their boundaries, a read deadline times out
// as net.Conn's does, and Close ends the relay.
func TestStreamConnOverARelay(t *testing.T) {
	echo, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() {
		buf := make([]byte, 1500)
		for {
			n, src, err := echo.ReadFromUDP(buf)
			if err != nil {
				return
			}
			if string(buf[:n]) != "silent" {
				_, _ = echo.WriteToUDP(append([]byte("echo:"), buf[:n]...), src)
			}
		}
	}()
	udp, err := net.Dial("udp4", echo.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	relayDone := make(chan error, 1)
	go func() {
		err := relay.ServeUDP(inR, outW, udp)
		outW.Close()
		relayDone <- err
	}()
	c := newStreamConn(inW, outR, true, func() {}, "demo/client-0", echo.LocalAddr().String())
	buf := make([]byte, 100)
	for _, p := range []string{"a/0", "a/1"} {
		if _, err := c.Write([]byte(p)); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		n, err := c.Read(buf)
		if err != nil || string(buf[:n]) != "echo:"+p {
			t.Fatalf("read %q, %v; want echo:%s", buf[:n], err, p)
		}
	}
	if _, err := c.Write([]byte("silent")); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if _, err := c.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a read with no reply: %v, want a deadline error", err)
	}
	var ne net.Error
	if _, err := c.Read(buf); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("the deadline error is not a net.Error timeout: %v", err)
	}
	c.Close()
	select {
	case err := <-relayDone:
		if err != nil {
			t.Fatalf("the relay after Close: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not end the relay")
	}
	udp.Close()
}

// TestForceCaptureFromEnv: AETHER_KIND_FORCE_CAPTURE names a capture mode
// every case's mesh is installed in; a typo is refused, naming the
// variable, before any cluster is made.
func TestForceCaptureFromEnv(t *testing.T) {
	t.Setenv(EnvArtifacts, t.TempDir())
	t.Setenv(EnvForceCapture, "redirect")
	o, err := OptionsFromEnv("udproute")
	if err != nil || o.ForceCapture != constants.CaptureRedirect {
		t.Fatalf("ForceCapture = %q, %v; want redirect", o.ForceCapture, err)
	}
	t.Setenv(EnvForceCapture, "redirekt")
	if _, err := OptionsFromEnv("udproute"); err == nil || !strings.Contains(err.Error(), EnvForceCapture+`="redirekt"`) {
		t.Fatalf("a misspelt mode: err = %v, want one naming %s", err, EnvForceCapture)
	}
	t.Setenv(EnvForceCapture, "")
	if o, err := OptionsFromEnv("udproute"); err != nil || o.ForceCapture != "" {
		t.Fatalf("unset: ForceCapture = %q, %v; want none", o.ForceCapture, err)
	}
}

// TestStreamConnDeadlineWakesAWaitingRead: a deadline set while a Read
// waits ends that Read, as net.Conn requires. quic-go's Transport.Close
// stops its reader only this way; without it eastwest's QUIC Initial
// case hung on kind for good. Close ends a waiting Read too.
func TestStreamConnDeadlineWakesAWaitingRead(t *testing.T) {
	for _, c := range []struct {
		name string
		stop func(*streamConn)
		want error
	}{
		{"deadline in the past", func(s *streamConn) { _ = s.SetReadDeadline(time.Now()) }, os.ErrDeadlineExceeded},
		{"close", func(s *streamConn) { _ = s.Close() }, net.ErrClosed},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, inW := io.Pipe()
			outR, outW := io.Pipe()
			defer outW.Close()
			s := newStreamConn(inW, outR, true, func() {}, "demo/client-0", "10.96.0.10:5000")
			defer s.Close()
			got := make(chan error, 1)
			go func() {
				_, err := s.Read(make([]byte, 64))
				got <- err
			}()
			// Let the Read start waiting: it must see the change, not
			// merely start after it.
			time.Sleep(50 * time.Millisecond)
			c.stop(s)
			select {
			case err := <-got:
				if !errors.Is(err, c.want) {
					t.Fatalf("Read returned %v, want %v", err, c.want)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("the waiting Read did not return after %s", c.name)
			}
		})
	}
	// A later deadline, then none: a Read waits again, and a datagram
	// still arrives.
	_, inW := io.Pipe()
	outR, outW := io.Pipe()
	s := newStreamConn(inW, outR, true, func() {}, "demo/client-0", "10.96.0.10:5000")
	defer s.Close()
	_ = s.SetReadDeadline(time.Now())
	_ = s.SetReadDeadline(time.Time{})
	go func() { _ = relay.WriteFrame(outW, []byte("late")) }()
	b := make([]byte, 64)
	n, err := s.Read(b)
	if err != nil || string(b[:n]) != "late" {
		t.Fatalf("after the deadline was cleared: Read = %q, %v", b[:n], err)
	}
}
