// Package deploy holds what sites install next to the binary: Prometheus
// rules, Grafana dashboards, the systemd unit, the default config and the
// package definition. Its tests check each with the real tool.
package deploy

import (
	"os/exec"
	"testing"

	"github.com/netloom/netloom/test/prom"
)

// TestPrometheusRules checks the shipped rules with promtool and runs
// their unit tests.
func TestPrometheusRules(t *testing.T) {
	if m := prom.Missing(prom.PromtoolBin); m != "" {
		t.Skip(m)
	}
	for _, args := range [][]string{
		{"check", "rules", "netloom.rules.yml"},
		{"test", "rules", "netloom.rules.test.yml"},
	} {
		cmd := exec.Command(prom.PromtoolBin, args...)
		cmd.Dir = "prometheus"
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %v: %v\n%s", args, err, out)
		}
	}
}
