package alert

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Labels are the Alertmanager labels of an alert: stable for as long as
// the alert lives (Alertmanager identifies alerts by them), so values and
// jobs are annotations.
func (a *Alert) Labels() map[string]string {
	l := map[string]string{"alertname": a.Rule, "severity": a.Severity, "service": "netloom", "kind": string(a.Kind)}
	s := a.Subject
	if s.Port != nil {
		l["guid"], l["port"] = s.Port.GUID.String(), strconv.Itoa(s.Port.Port)
		if s.Node != "" {
			l["node"] = s.Node
		}
	}
	if s.Remote != nil {
		l["remote_guid"], l["remote_port"] = s.Remote.GUID.String(), strconv.Itoa(s.Remote.Port)
		if s.RemoteNode != "" {
			l["remote_node"] = s.RemoteNode
		}
	}
	if s.Link != "" {
		l["link"] = s.Link
	}
	if a.Counter != "" {
		l["counter"] = a.Counter
	}
	if a.Event != "" {
		l["event"] = a.Event
	}
	return l
}

// Annotations are the Alertmanager annotations: what people read.
func (a *Alert) Annotations() map[string]string {
	desc := a.Summary
	since := ""
	if !a.JobsSince.IsZero() {
		since = " since " + a.JobsSince.UTC().Format(time.RFC3339)
	}
	if len(a.Jobs) > 0 {
		desc += ". Jobs that crossed it" + since + ": " + a.JobList()
	} else if len(a.ports) > 0 {
		desc += ". No job crossed it" + since
	}
	an := map[string]string{"summary": a.Summary, "description": desc,
		"value": strconv.FormatFloat(a.Value, 'g', -1, 64), "threshold": strconv.FormatFloat(a.Threshold, 'g', -1, 64),
		"netloom_id": a.ID}
	if len(a.Jobs) > 0 {
		an["jobs"] = a.JobList()
		users := ""
		for i, u := range a.Users() {
			if i > 0 {
				users += ","
			}
			users += u
		}
		an["users"] = users
	}
	return an
}

// postable is an alert as Alertmanager's v2 API takes it (POST
// /api/v2/alerts, the same body Prometheus sends).
type postable struct {
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations"`
	StartsAt     time.Time         `json:"startsAt"`
	EndsAt       time.Time         `json:"endsAt"`
	GeneratorURL string            `json:"generatorURL,omitempty"`
}

// WebhookPayload is the body posted to webhooks: the alerts that started
// firing or resolved, with their labels and annotations.
type WebhookPayload struct {
	Version     string         `json:"version"`
	Source      string         `json:"source"`
	ExternalURL string         `json:"external_url,omitempty"`
	Alerts      []WebhookAlert `json:"alerts"`
}

// WebhookAlert is one alert in a webhook body.
type WebhookAlert struct {
	Alert
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations"`
	GeneratorURL string            `json:"generator_url"`
}

// Update is one evaluation's outcome for the notifier: the alerts that
// started firing or resolved, and every alert firing now.
type Update struct {
	Changed []Alert
	Firing  []Alert
}

// Notifier delivers alerts to Alertmanagers (again while they fire, so
// Alertmanager keeps them) and changes to webhooks. It never blocks the
// evaluation: updates beyond its queue are dropped and counted, and the
// next resend carries the firing alerts anyway.
type Notifier struct {
	cfg     Config
	client  *http.Client
	log     *slog.Logger
	updates chan Update
	sent    *prometheus.CounterVec
	dropped prometheus.Counter
}

// NewNotifier builds a notifier; its metrics go to reg when not nil.
func NewNotifier(cfg Config, log *slog.Logger, reg prometheus.Registerer) *Notifier {
	n := &Notifier{cfg: cfg.WithDefaults(), log: log, client: &http.Client{Timeout: 10 * time.Second},
		updates: make(chan Update, 64),
		sent: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "netloom_alert_notifications_total",
			Help: "Alert notifications posted, by receiver type and result."}, []string{"receiver", "result"}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{Name: "netloom_alert_notifications_dropped_total",
			Help: "Alert updates dropped because the notifier's queue was full."}),
	}
	if reg != nil {
		reg.MustRegister(n.sent, n.dropped)
	}
	return n
}

// Enabled says whether there is anywhere to deliver to.
func (n *Notifier) Enabled() bool { return len(n.cfg.Alertmanagers)+len(n.cfg.Webhooks) > 0 }

// Send queues an update without blocking.
func (n *Notifier) Send(u Update) {
	if !n.Enabled() {
		return
	}
	select {
	case n.updates <- u:
	default:
		n.dropped.Inc()
	}
}

// GeneratorURL links to the alert in the UI.
func (n *Notifier) GeneratorURL(a *Alert) string { return n.cfg.ExternalURL + "/alerts?alert=" + a.ID }

// Run delivers until ctx ends.
func (n *Notifier) Run(ctx context.Context) {
	if !n.Enabled() {
		<-ctx.Done()
		return
	}
	t := time.NewTicker(n.cfg.ResendInterval)
	defer t.Stop()
	var firing []Alert
	// Resolutions that did not reach an Alertmanager are tried again.
	retry := map[string][]Alert{}
	for {
		select {
		case <-ctx.Done():
			return
		case u := <-n.updates:
			firing = u.Firing
			for _, am := range n.cfg.Alertmanagers {
				if len(u.Changed) > 0 && !n.postAlertmanager(ctx, am, u.Changed) {
					retry[am] = append(retry[am], resolvedOnly(u.Changed)...)
				}
			}
			if len(u.Changed) > 0 {
				for _, wh := range n.cfg.Webhooks {
					n.postWebhook(ctx, wh, u.Changed)
				}
			}
		case <-t.C:
			for _, am := range n.cfg.Alertmanagers {
				send := append(retry[am], firing...)
				if len(send) == 0 {
					continue
				}
				if n.postAlertmanager(ctx, am, send) {
					delete(retry, am)
				}
			}
		}
	}
}

func resolvedOnly(as []Alert) []Alert {
	var out []Alert
	for _, a := range as {
		if a.State == Resolved {
			out = append(out, a)
		}
	}
	return out
}

// postAlertmanager posts alerts to one Alertmanager's v2 API. A firing
// alert ends, unless sent again, after four resend intervals (as
// Prometheus does), so a daemon that stops does not leave it firing.
func (n *Notifier) postAlertmanager(ctx context.Context, base string, as []Alert) bool {
	now := time.Now()
	body := make([]postable, 0, len(as))
	for i := range as {
		a := &as[i]
		p := postable{Labels: a.Labels(), Annotations: a.Annotations(), StartsAt: a.StartsAt, GeneratorURL: n.GeneratorURL(a)}
		if a.State == Resolved {
			p.EndsAt = a.EndsAt
		} else {
			p.EndsAt = now.Add(4 * n.cfg.ResendInterval)
		}
		body = append(body, p)
	}
	err := n.post(ctx, base+"/api/v2/alerts", body)
	n.count("alertmanager", err)
	if err != nil {
		n.log.Warn("alert delivery to Alertmanager failed; trying again at the next resend", "url", base, "alerts", len(as), "err", err)
		return false
	}
	return true
}

func (n *Notifier) postWebhook(ctx context.Context, url string, as []Alert) {
	p := WebhookPayload{Version: "1", Source: "netloom", ExternalURL: n.cfg.ExternalURL, Alerts: make([]WebhookAlert, len(as))}
	for i := range as {
		a := &as[i]
		p.Alerts[i] = WebhookAlert{Alert: *a, Labels: a.Labels(), Annotations: a.Annotations(), GeneratorURL: n.GeneratorURL(a)}
	}
	err := n.post(ctx, url, p)
	n.count("webhook", err)
	if err != nil {
		n.log.Warn("alert delivery to webhook failed", "url", url, "alerts", len(as), "err", err)
	}
}

func (n *Notifier) count(receiver string, err error) {
	result := "ok"
	if err != nil {
		result = "error"
	}
	n.sent.WithLabelValues(receiver, result).Inc()
}

func (n *Notifier) post(ctx context.Context, url string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "netloom")
	resp, err := n.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("POST %s: %s: %s", url, resp.Status, bytes.TrimSpace(msg))
	}
	return nil
}
