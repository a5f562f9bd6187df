package memory

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/memory/durable"
)

// metrics are the service's Prometheus figures, in a registry the Service
// owns (never the global default one, so two services in one process each
// report their own). Every label is from a closed set: the route pattern
// (never the path, which holds ids), the lane, the outcome. No id, no text.
type metrics struct {
	reg      *prometheus.Registry
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	fsync    prometheus.Histogram
}

// newFsyncMetric is the histogram of the memory root's syncs. It is made
// before the stores are opened, so each is given a Disk that times its
// syncs in it (fsyncDisk) at construction.
func newFsyncMetric() prometheus.Histogram {
	return prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "clankie_memory_fsync_duration_seconds",
		Help:    "Duration of each fsync or fdatasync in the memory root: the person journal's group commits (one can acknowledge many proposals), a checkpoint's person logs and catalog, and every whole-file write's file and directory.",
		Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1},
	})
}

// fsyncDisk makes the file stores' writes durable, timing each sync in h.
func fsyncDisk(h prometheus.Histogram) durable.Disk {
	return durable.NewDisk(func(d time.Duration) { h.Observe(d.Seconds()) })
}

func newMetrics(s *Service, fsync prometheus.Histogram) *metrics {
	reg := prometheus.NewRegistry()
	m := &metrics{
		reg: reg,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "clankie_memory_requests_total",
			Help: "Requests answered, by route pattern, lane of the bearer (none when unauthenticated) and outcome.",
		}, []string{"route", "lane", "outcome"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "clankie_memory_request_duration_seconds",
			Help:    "Time to answer a request, by route pattern.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}, []string{"route"}),
		fsync: fsync,
	}
	gauge := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f)
	}
	counter := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, f)
	}
	reg.MustRegister(m.requests, m.latency, m.fsync,
		gauge("clankie_memory_people", "People with at least one fact.", func() float64 { return float64(s.people.Stats().People) }),
		gauge("clankie_memory_facts", "Facts kept, across every person.", func() float64 { return float64(s.people.Stats().Facts) }),
		gauge("clankie_memory_episodes_unretained", "Episodes in the recent window (at most 128).", func() float64 { return float64(s.episodes.Stats().Unretained) }),
		gauge("clankie_memory_episodes_retained", "Episodes kept for good (at most 1024).", func() float64 { return float64(s.episodes.Stats().Retained) }),
		gauge("clankie_memory_person_files_corrupt", "Person files set aside as unreadable (see 'clankie memory corrupt').", func() float64 { return float64(len(s.corruptFiles())) }),
		counter("clankie_memory_people_cache_hits_total", "Person lookups served from the decoded-person cache.", func() float64 { return float64(s.people.Metrics().CacheHits) }),
		counter("clankie_memory_people_cache_misses_total", "Person lookups that read the person's log from disk, or (PostgreSQL) their rows, the cache not holding their current version.", func() float64 { return float64(s.people.Metrics().CacheMisses) }),
		gauge("clankie_memory_people_cache_bytes", "Bytes of decoded people the person cache holds (bounded by CLANKIE_MEMORY_CACHE_MB).", func() float64 { return float64(s.people.Metrics().CacheBytes) }),
		counter("clankie_memory_people_cache_evictions_total", "People dropped from the person cache, least recently used first, to stay within its bound.", func() float64 { return float64(s.people.Metrics().CacheEvictions) }),
		counter("clankie_memory_journal_syncs_total", "fdatasyncs of the person store's journal (group commit: one can acknowledge many changes).", func() float64 { return float64(s.people.Metrics().JournalSyncs) }),
		counter("clankie_memory_journal_changes_total", "Person-store changes made durable by a journal sync; divided by the syncs it is the group-commit factor.", func() float64 { return float64(s.people.Metrics().JournalChanges) }),
		counter("clankie_memory_journal_sync_seconds_total", "Time spent in journal fdatasyncs.", func() float64 { return s.people.Metrics().JournalSyncTime.Seconds() }),
		counter("clankie_memory_people_compactions_total", "Person logs rewritten at 5/4 of their live size.", func() float64 { return float64(s.people.Metrics().Compactions) }),
		counter("clankie_memory_people_checkpoints_total", "Catalog checkpoints of the person store.", func() float64 { return float64(s.people.Metrics().Checkpoints) }),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return m
}

// reqLabels is filled in while a request is answered: the route wrapper
// knows the lane once the bearer is checked.
type reqLabels struct{ lane api.Lane }

type labelsKey struct{}

// setLane records the authenticated lane for the request's metrics.
func setLane(r *http.Request, lane api.Lane) {
	if l, ok := r.Context().Value(labelsKey{}).(*reqLabels); ok {
		l.lane = lane
	}
}

// instrument counts and times every request by its route pattern, which
// the mux sets on the request once it has matched (an unmatched request is
// "unmatched"; a path's ids never become a label).
func (m *metrics) instrument(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		labels := &reqLabels{lane: "none"}
		r = r.WithContext(context.WithValue(r.Context(), labelsKey{}, labels))
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		next.ServeHTTP(sw, r)
		route := r.Pattern
		if route == "" {
			route = "unmatched"
		}
		m.requests.WithLabelValues(route, string(labels.lane), outcome(sw.code)).Inc()
		m.latency.WithLabelValues(route).Observe(time.Since(start).Seconds())
	})
}

// outcome names a status class in words a dashboard can group by.
func outcome(code int) string {
	switch {
	case code < 300:
		return "ok"
	case code == http.StatusUnauthorized:
		return "unauthorized"
	case code == http.StatusForbidden:
		return "forbidden"
	case code == http.StatusNotFound:
		return "not_found"
	case code == http.StatusConflict:
		return "conflict"
	case code == http.StatusRequestEntityTooLarge, code == http.StatusBadRequest:
		return "invalid"
	case code < 500:
		return "client_error_" + strconv.Itoa(code)
	default:
		return "server_error"
	}
}

// statusWriter keeps the status a handler wrote.
type statusWriter struct {
	http.ResponseWriter
	code  int
	wrote bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.code, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// MetricsHandler serves the registry in Prometheus's text format, with no
// credential: for the separate CLANKIE_METRICS_ADDR listener only.
func (s *Service) MetricsHandler() http.Handler {
	h := promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A shared store's counts are as of its last refresh: take one per
		// scrape (an outage leaves the last figures; /readyz tells it).
		_ = s.people.Refresh(r.Context())
		_ = s.episodes.Refresh(r.Context())
		h.ServeHTTP(w, r)
	})
}

// Registry is where other parts of the same process (the bridges under
// `clankie up`) register their metrics, so one scrape shows them all.
func (s *Service) Registry() *prometheus.Registry { return s.metrics.reg }

// metricsRoute is GET /metrics on the service's own listener: the operator
// bearer, then the registry.
func (s *Service) metricsRoute() http.Handler {
	h := s.MetricsHandler()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		who, ok := s.bearers.Authenticate(r.Header.Get("Authorization"))
		if !ok {
			writeError(w, http.StatusUnauthorized, "unauthorized", credentialSentence(api.OperatorOnly))
			return
		}
		setLane(r, who.Lane)
		if who.Lane != api.LaneOperator {
			writeError(w, http.StatusForbidden, "forbidden", "Only the operator bearer may read /metrics.")
			return
		}
		h.ServeHTTP(w, r)
	})
}
