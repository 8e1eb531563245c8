package munge_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/netloom/netloom/internal/munge"
	slurmtest "github.com/netloom/netloom/test/slurm"
)

// startMunged runs a real munged with its own key and socket.
func startMunged(t *testing.T) munge.Client {
	t.Helper()
	if m := slurmtest.MungeMissing(); m != "" {
		t.Skip(m)
	}
	m, err := slurmtest.StartMunge(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Stop)
	return munge.Client{Socket: m.Socket}
}

func TestEncodeDecode(t *testing.T) {
	c := startMunged(t)
	if err := c.Check(); err != nil {
		t.Fatalf("Check: %v", err)
	}
	payload := []byte("netloom1 \x00\xff binary")
	before := time.Now().Add(-time.Second)
	cred, err := c.Encode(payload, 120*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Decode(cred)
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Payload) != string(payload) || got.UID != uint32(os.Getuid()) || got.GID != uint32(os.Getgid()) || got.Restricted ||
		got.TTL != 120*time.Second || got.Encoded.Before(before.Truncate(time.Second)) || got.Encoded.After(time.Now()) {
		t.Errorf("decoded %+v", got)
	}
	// munged remembers what it decoded.
	if _, err := c.Decode(cred); !errors.Is(err, munge.ErrReplayed) {
		t.Errorf("second decode: %v, want replayed", err)
	}
	for _, bad := range []string{"", "MUNGE:AAAA:", "garbage", "MUNGE:" + string(cred[6:20]) + ":", "x\x00y"} {
		_, err := c.Decode([]byte(bad))
		var me *munge.Error
		if !errors.As(err, &me) || !errors.Is(err, munge.ErrInvalid) || me.Unavailable() {
			t.Errorf("decode %q: %v, want invalid", bad, err)
		}
	}
	// A credential whose bytes are changed fails.
	tampered := append([]byte(nil), cred...)
	tampered[len(tampered)/2] ^= 1
	if _, err := c.Decode(tampered); !errors.Is(err, munge.ErrInvalid) {
		t.Errorf("tampered: %v, want invalid", err)
	}
	// Empty payload.
	cred, err = c.Encode(nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := c.Decode(cred); err != nil || len(got.Payload) != 0 || got.TTL <= 0 {
		t.Errorf("empty payload: %+v %v", got, err)
	}
}

// TestRestricted: a credential that only one uid may decode says so.
func TestRestricted(t *testing.T) {
	c := startMunged(t)
	uid := strconv.Itoa(os.Getuid())
	out, err := exec.Command("munge", "--socket", c.Socket, "--restrict-uid", uid, "--string", "x").Output()
	if err != nil {
		t.Skipf("munge(1): %v", err)
	}
	got, err := c.Decode(bytes.TrimSpace(out))
	if err != nil || !got.Restricted || got.Decoder != uint32(os.Getuid()) || string(got.Payload) != "x" {
		t.Errorf("restricted credential: %+v %v", got, err)
	}
}

func TestNoMunged(t *testing.T) {
	c := munge.Client{Socket: t.TempDir() + "/none.sock"}
	err := c.Check()
	var me *munge.Error
	if !errors.As(err, &me) || !me.Unavailable() || !errors.Is(err, munge.ErrUnavailable) {
		t.Fatalf("Check without munged: %v", err)
	}
	if _, err := c.Decode([]byte("MUNGE:AAAA:")); !errors.Is(err, munge.ErrUnavailable) {
		t.Errorf("decode without munged: %v", err)
	}
}

// benchMunged starts a munged for a benchmark (skipped without one) and
// returns a client of it.
func benchMunged(b *testing.B) munge.Client {
	if m := slurmtest.MungeMissing(); m != "" {
		b.Skip(m)
	}
	m, err := slurmtest.StartMunge(context.Background(), "")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(m.Stop)
	return munge.Client{Socket: m.Socket}
}

// BenchmarkDecode is one munged round trip per credential (the cost of a
// credential the daemon has not seen; later datagrams with it cost none).
func BenchmarkDecode(b *testing.B) {
	c := benchMunged(b)
	var err error
	creds := make([][]byte, b.N)
	for i := range creds {
		if creds[i], err = c.Encode(make([]byte, 48), 0); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := range b.N {
		if _, err := c.Decode(creds[i]); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeParallel: decodes from several goroutines at once, as the
// daemon's decode workers do (munged serves them with its own threads).
func BenchmarkDecodeParallel(b *testing.B) {
	c := benchMunged(b)
	creds := make(chan []byte, b.N)
	for range b.N {
		cred, err := c.Encode(make([]byte, 48), 0)
		if err != nil {
			b.Fatal(err)
		}
		creds <- cred
	}
	b.SetParallelism(2) // 2 x GOMAXPROCS goroutines
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.Decode(<-creds); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
