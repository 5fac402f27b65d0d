package redlock_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/redlock"
)

// A Redlock holder's label, whatever it holds, is reported by Inspect as
// it is, with the holder's token (a label ending in '*' lost it, since
// Inspect took a trailing '*' for a waiter's mark), and the lock is free on
// every node once released.
func TestIntegrationHostileLabels(t *testing.T) {
	servers := testenv.StartRedisN(t, 3, testenv.RedisConfig{})
	age(t, servers)
	c := newClient(t, addrsOf(servers), goRedis)
	labels := []string{
		"ends*", "*", "**", "a~b~", "~", "a:b", "{tag}", "}{", " with  spaces ", "=Mutex=",
		strings.Repeat("x", dlock.MaxLabelBytes-1) + "*" + strings.Repeat("y", 60),
		"\xff*", "\x01", "",
	}
	var wg sync.WaitGroup
	for i, label := range labels {
		name := "label-" + string(rune('a'+i))
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			l, err := c.NewMutex(name, redlock.WithTTL(10*time.Second)).Lock(dlock.WithLabel(ctx, label))
			if err != nil {
				t.Errorf("label %q: %v", label, err)
				return
			}
			want, _ := dlock.LabelFrom(dlock.WithLabel(ctx, label))
			info, err := c.Inspect(ctx, name)
			if err != nil || len(info.Holders) != 1 || info.Holders[0].Owner != l.Token() || info.Holders[0].Label != want {
				t.Errorf("label %q: Inspect reports %+v (%v); want owner %q, label %q", label, info.Holders, err, l.Token(), want)
			}
			if err := l.Release(ctx); err != nil {
				t.Errorf("label %q: Release: %v", label, err)
			}
			for deadline := time.Now().Add(5 * time.Second); strings.Join(values(servers, name), "") != ""; time.Sleep(5 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Errorf("label %q: the key is still on some node 5s after Release: %q", label, values(servers, name))
					break
				}
			}
		})
	}
	wg.Wait()
}
