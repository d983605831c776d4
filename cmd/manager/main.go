/*
Copyright 2026 The projection-recovery Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

// Command manager runs the projection-recovery operator.
package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	goruntime "runtime"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/zapr"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
	"github.com/projection-recovery/projection-recovery/controllers"
	"github.com/projection-recovery/projection-recovery/internal/completeness"
	"github.com/projection-recovery/projection-recovery/internal/lazylog"
	"github.com/projection-recovery/projection-recovery/internal/reconstore"
	"github.com/projection-recovery/projection-recovery/internal/store"
)

// version is the release of this binary, stamped at build time with
// -ldflags "-X main.version=v1.2.3"; "dev" for an unstamped build.
var version = "dev"

type options struct {
	metricsAddr             string
	probeAddr               string
	enableAutoRecovery      bool
	maxConcurrentReconciles int
	reconWorkers            int
	reconTimeout            time.Duration
	reconMaxRecords         int64
	reconDetectCPU          float64
	syncPeriod              time.Duration
	leaderElect             bool
	leaderElectionNamespace string
	dev                     bool
	logLevel                string
	completenessAddr        string
	natsURL                 string
	ownerID                 string
	watchLabelSelector      string
	watchNamespaces         []string
	approverServiceAccounts []string
	metricsSecure           bool
	reconcileEvery          time.Duration
	writeSliceBudget        time.Duration
	watchSecrets            bool
	pprofAddr               string
	showVersion             bool
}

// errVersion is returned by parseFlags for --version, as flag.ErrHelp is for
// --help: both are requests answered on stdout with exit status 0, not errors.
var errVersion = errors.New("version requested")

// usageError is a command line the manager cannot run with (exit status 2).
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// newFlagSet binds every flag to o. Its output is discarded: usage and
// errors are printed once, by mainCode, to the right stream.
func newFlagSet(o *options) *flag.FlagSet {
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":8080", "Address the Prometheus metrics endpoint binds to; \"0\" disables it.")
	// FR-APR10
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "Address /healthz and /readyz bind to. Probes never depend on the recovery worker.")
	// NFR-APR01
	fs.BoolVar(&o.enableAutoRecovery, "enable-auto-recovery", false, "Apply verified pages to SQL. Off by default: the controller then only reports completeness. Either way recovery's tables come from the migrate step (manager migrate, as the schema owner); the runtime role needs only grants, and a scope whose database lacks a migration reports SCHEMA_MISSING (docs/database-role.md). A role that may create tables in the schema (a disposable database's superuser) also migrates at startup with this flag on.")
	fs.IntVar(&o.maxConcurrentReconciles, "max-concurrent-reconciles", 4, "Scopes reconciled in parallel by this manager.")
	fs.IntVar(&o.reconWorkers, "reconciliation-workers", 2, "ProjectionReconciliations (dry runs, applies, rollbacks) run in parallel by this manager.")
	fs.Int64Var(&o.reconMaxRecords, "reconciliation-max-records", reconstore.DefaultMaxSnapshotRecords, "Records a reconciliation reads of each side of a scope at most; a larger scope is refused snapshot_too_large.")
	fs.Float64Var(&o.reconDetectCPU, "reconciliation-detect-cpu", controllers.DefaultReconciliationDetectCPU, "Share of one CPU a scheduled dry run's detection (a ProjectionReconciliation with spec.schedule) takes at most, between 0 and 1: it sleeps between source pages so the live path keeps the cores (docs/performance.md). A dry run without a schedule, one a person asked for, is never paced. A paced detection whose estimate ends past --reconciliation-timeout takes the share it needs to end in time; one that would not end in time even unpaced stops at once, Stalled DetectionPacedPastDeadline. 0 or 1: unpaced.")
	fs.DurationVar(&o.reconTimeout, "reconciliation-timeout", controllers.DefaultReconciliationRunTimeout, "Deadline of one reconciliation dry run, apply or rollback; a run past it is cancelled and retried.")
	fs.DurationVar(&o.syncPeriod, "sync-period", 10*time.Hour, "Full resync period of the informer cache (cycles are scheduled by each resource's interval, not by this).")
	// FR-APR08
	fs.BoolVar(&o.leaderElect, "leader-elect", false, "Use Kubernetes leader election. Not needed for write safety, which comes from the PostgreSQL lease fence.")
	fs.StringVar(&o.leaderElectionNamespace, "leader-election-namespace", "", "Namespace of the leader election Lease (defaults to the in-cluster namespace).")
	// FR-APR11
	fs.StringVar(&o.completenessAddr, "completeness-bind-address", ":8082", "Address the read-only GET /v2/projection-completeness endpoint binds to; \"0\" disables it.")
	// FR-APR06 R2, FR-APR10
	fs.StringVar(&o.natsURL, "nats-url", "", "NATS server of the live feed. When set, a reconnect edge triggers a cycle for every scope, position notifications are published to it, and reconciliation can republish an overdue one.")
	// FR-APR08
	fs.StringVar(&o.ownerID, "owner-id", "", "Lease owner identity of this manager. Defaults to <hostname>-<random>; must differ between managers.")
	fs.StringVar(&o.watchLabelSelector, "watch-label-selector", "", "Only reconcile ProjectionRecoveries matching this label selector (sharding scopes across managers).")
	fs.Func("watch-namespace", "Comma-separated namespaces whose ProjectionRecoveries and ProjectionReconciliations this manager watches (and whose Secrets it reads). Empty (the default): every namespace, which needs cluster-wide Secret read.", func(v string) error {
		ns, err := parseNamespaces(v)
		o.watchNamespaces = ns
		return err
	})
	fs.Func("approver-service-accounts", "Comma-separated service accounts (namespace:name) whose approvals and rollbacks of ProjectionReconciliations are executed. Any other service account is refused whatever its RBAC allows: a GitOps controller holding every verb must not turn a commit into an approved repair. Empty (the default): people only.", func(v string) error {
		sas, err := parseServiceAccounts(v)
		o.approverServiceAccounts = sas
		return err
	})
	fs.BoolVar(&o.metricsSecure, "metrics-secure", false, "Serve metrics over HTTPS behind controller-runtime's authentication and authorization filter: a scraper needs a token allowed to get the /metrics non-resource URL (TokenReview and SubjectAccessReview).")
	fs.DurationVar(&o.reconcileEvery, "reconcile-every", 0, "Keep a ProjectionReconciliation <recovery>-scheduled (label "+controllers.LabelManagedBy+"="+controllers.ManagedBySchedule+", owned by its ProjectionRecovery) that dry-runs every scope this often and reports drift as DriftFound events and projection_reconciliation_drift_findings; it never applies. 0 (the default) is off and removes the ones an earlier run created. Between 1m and 168h.")
	fs.DurationVar(&o.writeSliceBudget, "write-slice-budget", store.DefaultSliceBudget, "How long one write slice of a recovery page aims to hold the projection write lock of its keys, which a live write on those keys also takes: while a live write waits, a page commits in slices sized to this, so it waits about this long at most behind recovery (docs/live-writes.md). Longer catches up faster; a negative value commits each page in one transaction.")
	fs.BoolVar(&o.watchSecrets, "watch-secrets", true, "Keep a metadata-only watch on Secrets (names and resourceVersions, never data): an idle cycle reuses the Secret values it read while their resourceVersion is unchanged, and a rotated Secret wakes the resources referencing it at once. Needs list and watch on Secrets; false: every cycle gets its 1-3 Secrets and get suffices.")
	fs.StringVar(&o.pprofAddr, "pprof-bind-address", "0", "Address Go's pprof endpoints (/debug/pprof/) bind to, for profiling the manager; \"0\" (the default) disables them. Profiles can hold sensitive data: bind to loopback or protect the port.")
	fs.BoolVar(&o.dev, "dev", false, "Human-readable console logs instead of JSON.")
	fs.StringVar(&o.logLevel, "log-level", "info", "Minimum log level: debug, info, warn, error.")
	fs.BoolVar(&o.showVersion, "version", false, "Print the version and exit.")
	return fs
}

// usage is the text of --help.
func usage() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Usage: manager [flags]\n\nRuns the projection-recovery operator: reconciles ProjectionRecovery resources,\nmaking each scope's SQL projection provably complete again.\n\n"+
		"Subcommands:\n"+
		"  manager migrate   apply recovery's schema to a database, as the schema owner; the runtime roles only get grants\n"+
		"                    (the chart's migrate hook Job: migrate.enabled; manager migrate --help; docs/database-role.md)\n"+
		"  manager drain     delete a namespace's resources and wait for their finalizers (the local profile's pre-delete hook; manager drain --help)\n\n"+
		"Flags:\n")
	fs := newFlagSet(&options{})
	fs.SetOutput(&b)
	fs.PrintDefaults()
	return b.String()
}

// parseFlags parses and validates the command line. It returns flag.ErrHelp
// for -h/--help and errVersion for --version; any other error is a
// *usageError.
func parseFlags(args []string) (options, error) {
	var o options
	fs := newFlagSet(&o)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return o, err
		}
		return o, &usageError{err}
	}
	if o.showVersion {
		return o, errVersion
	}
	// The owner id is shown in status.lease.owner, which the CRD bounds to
	// 253 characters: a longer one would make every status patch fail.
	if len(o.ownerID) > 253 {
		return o, &usageError{fmt.Errorf("--owner-id must be at most 253 bytes, got %d", len(o.ownerID))}
	}
	if o.reconWorkers < 1 || o.reconTimeout <= 0 || o.reconMaxRecords < 1 {
		return o, &usageError{fmt.Errorf("--reconciliation-workers, --reconciliation-timeout and --reconciliation-max-records must be positive, got %d, %s and %d", o.reconWorkers, o.reconTimeout, o.reconMaxRecords)}
	}
	if !(o.reconDetectCPU >= 0 && o.reconDetectCPU <= 1) { // NaN too
		return o, &usageError{fmt.Errorf("--reconciliation-detect-cpu must be between 0 and 1 (a share of one CPU; 0 or 1: unpaced), got %v", o.reconDetectCPU)}
	}
	if o.maxConcurrentReconciles < 1 {
		return o, &usageError{fmt.Errorf("--max-concurrent-reconciles must be at least 1, got %d", o.maxConcurrentReconciles)}
	}
	if _, err := labels.Parse(o.watchLabelSelector); err != nil {
		return o, &usageError{fmt.Errorf("--watch-label-selector: %w", err)}
	}
	if o.reconcileEvery != 0 && (o.reconcileEvery < time.Minute || o.reconcileEvery > 168*time.Hour) {
		// The CRD's schedule.interval bounds: a value outside them could never be stored.
		return o, &usageError{fmt.Errorf("--reconcile-every must be 0 (off) or between 1m and 168h, got %s", o.reconcileEvery)}
	}
	if o.writeSliceBudget > 0 && (o.writeSliceBudget < time.Millisecond || o.writeSliceBudget > 10*time.Second) {
		// Below a millisecond every slice would be a few events of fixed
		// cost; above seconds it is no bound at all (negative says "whole pages").
		return o, &usageError{fmt.Errorf("--write-slice-budget must be negative (whole pages) or between 1ms and 10s, got %s", o.writeSliceBudget)}
	}
	if o.syncPeriod < time.Minute {
		return o, &usageError{fmt.Errorf("--sync-period must be at least 1m, got %s", o.syncPeriod)}
	}
	return o, nil
}

// versionString is the --version answer: the stamped version, the Go
// toolchain and, when the binary was built from a VCS checkout, its revision.
func versionString() string {
	s := "manager " + version
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return s + " (" + goruntime.Version() + ")"
	}
	details := []string{bi.GoVersion}
	var rev, modified string
	for _, kv := range bi.Settings {
		switch kv.Key {
		case "vcs.revision":
			rev = kv.Value
		case "vcs.modified":
			modified = kv.Value
		}
	}
	if rev != "" {
		if modified == "true" {
			rev += "-dirty"
		}
		details = append(details, "revision "+rev)
	}
	return s + " (" + strings.Join(details, ", ") + ")"
}

func newLogger(o options) (*zap.Logger, error) {
	cfg := zap.NewProductionConfig()
	if o.dev {
		cfg = zap.NewDevelopmentConfig()
		cfg.EncoderConfig.EncodeLevel = zapcore.CapitalColorLevelEncoder
	}
	lvl, err := zapcore.ParseLevel(o.logLevel)
	if err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	cfg.Level = zap.NewAtomicLevelAt(lvl)
	cfg.EncoderConfig.TimeKey = "ts"
	cfg.EncoderConfig.EncodeTime = zapcore.RFC3339NanoTimeEncoder
	return cfg.Build()
}

func main() {
	os.Exit(mainCode(os.Args[1:], os.Stdout, os.Stderr))
}

// mainCode runs the manager and returns the process exit status: 0 on a
// clean stop and for --help and --version (answered on stdout), 2 for a
// command line it cannot run with, 1 for any other failure.
func mainCode(args []string, stdout, stderr io.Writer) int {
	err := run(args)
	var ue *usageError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(stdout, usage())
		return 0
	case errors.Is(err, errVersion):
		fmt.Fprintln(stdout, versionString())
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "manager: %v\nRun 'manager --help' for usage.\n", err)
		return 2
	}
	fmt.Fprintln(stderr, "manager:", err)
	return 1
}

func run(args []string) error {
	if len(args) > 0 && args[0] == "migrate" {
		return migrateMain(args[1:])
	}
	if len(args) > 0 && args[0] == "drain" {
		return drainMain(args[1:])
	}
	o, err := parseFlags(args)
	if err != nil {
		return err
	}
	zl, err := newLogger(o)
	if err != nil {
		return err
	}
	defer func() { _ = zl.Sync() }()
	// Key/value pairs are encoded only when a line is written: every
	// reconcile adds four loggers' worth (controller-runtime's and the
	// scope), and an idle cycle writes no line (internal/lazylog).
	ctrl.SetLogger(lazylog.New(zapr.NewLogger(zl)))
	log := ctrl.Log.WithName("setup")

	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(recoveryv1.AddToScheme(scheme))

	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 metricsOptions(o),
		HealthProbeBindAddress:  o.probeAddr,
		PprofBindAddress:        o.pprofAddr,
		LeaderElection:          o.leaderElect,
		LeaderElectionID:        "projection-recovery.recovery.projection.io",
		LeaderElectionNamespace: o.leaderElectionNamespace,
		Cache:                   cacheOptions(o),
		// Shutdown cancels the running cycles; give them time to roll back and
		// release their leases (FR-APR10).
		GracefulShutdownTimeout: ptr(30 * time.Second),
	})
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
	}

	owner := o.ownerID
	if owner == "" {
		owner = defaultOwner()
	}
	clk := managerClock()
	registry := completeness.NewRegistry(clk.Now)
	rec := &controllers.ProjectionRecoveryReconciler{
		Clock:                   clk,
		Client:                  mgr.GetClient(),
		APIReader:               mgr.GetAPIReader(),
		Recorder:                mgr.GetEventRecorder("projection-recovery"),
		AutoRecovery:            o.enableAutoRecovery,
		MaxConcurrentReconciles: o.maxConcurrentReconciles,
		Owner:                   owner,
		WatchSecrets:            o.watchSecrets,
		// The schema is the migrate step's; with auto-recovery on, a role
		// that may create tables also applies missing migrations, any other
		// reports SCHEMA_MISSING (NFR-APR01, store.EnsureSchema).
		Connections: &controllers.Connections{MaxConnsPerDSN: int32(max(2, o.maxConcurrentReconciles)), ApplySchema: o.enableAutoRecovery,
			SliceBudget: o.writeSliceBudget, Log: ctrl.Log.WithName("notify")},
		Registry: registry,
	}
	if o.natsURL != "" {
		trig, err := controllers.NewNATSTrigger(o.natsURL, mgr.GetCache(), ctrl.Log.WithName("nats-trigger"))
		if err != nil {
			return err
		}
		if err := mgr.Add(trig); err != nil {
			return err
		}
		rec.Triggers = trig.Events
		rec.Connections.NATS = trig.Conn()
	}
	if err := rec.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up controller: %w", err)
	}
	// ProjectionReconciliation: dry runs, approved applies and
	// rollbacks. Its own pools: it never creates recovery's schema and runs
	// no polling outbox publisher; with NATS it republishes, and drains the
	// outbox right after a repair committed notifications.
	reconTelemetry, err := controllers.ReconciliationTelemetry()
	if err != nil {
		return fmt.Errorf("registering the reconciliation metrics: %w", err)
	}
	if err := (&controllers.ProjectionReconciliationReconciler{
		Clock:                   clk,
		Telemetry:               reconTelemetry,
		Client:                  mgr.GetClient(),
		APIReader:               mgr.GetAPIReader(),
		Recorder:                mgr.GetEventRecorder("projection-reconciliation"),
		Connections:             &controllers.Connections{MaxConnsPerDSN: 2, NATS: rec.Connections.NATS, Log: ctrl.Log.WithName("reconciliation")},
		ApproverServiceAccounts: o.approverServiceAccounts,
		MaxConcurrentReconciles: o.reconWorkers,
		RunTimeout:              o.reconTimeout,
		MaxSnapshotRecords:      o.reconMaxRecords,
		DetectCPU:               o.reconDetectCPU,
		Registry:                registry,
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the reconciliation controller: %w", err)
	}
	// Scheduled reconciliation of every scope, off unless
	// --reconcile-every is set. Registered when off too: off removes the
	// scheduled reconciliations an earlier run created.
	if err := (&controllers.ProjectionReconciliationScheduler{
		Client:   mgr.GetClient(),
		Recorder: mgr.GetEventRecorder("projection-reconciliation-schedule"),
		Every:    o.reconcileEvery,
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the reconciliation scheduler: %w", err)
	}
	if o.completenessAddr != "0" {
		srv, err := completenessServer(o, registry.Handler(), mgr.GetConfig(), mgr.GetHTTPClient())
		if err != nil {
			return err
		}
		if err := mgr.Add(srv); err != nil {
			return err
		}
	}

	// Probes only say the process and its API connection are alive; they never
	// depend on the recovery worker, a source or a database (FR-APR10).
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}

	log.Info("starting manager", "version", versionString(), "owner", owner, "autoRecovery", o.enableAutoRecovery, "maxConcurrentReconciles", o.maxConcurrentReconciles, "leaderElection", o.leaderElect, "watchNamespaces", o.watchNamespaces, "metricsSecure", o.metricsSecure, "reconcileEvery", o.reconcileEvery.String(), "reconciliationDetectCPU", o.reconDetectCPU, "writeSliceBudget", o.writeSliceBudget.String(), "watchSecrets", o.watchSecrets)
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		return fmt.Errorf("running manager: %w", err)
	}
	return nil
}

func ptr[T any](v T) *T { return &v }

// parseNamespaces splits the --watch-namespace list. Every entry must be a
// namespace name (a DNS-1123 label) and appear once: a typo must stop the
// manager, not leave a namespace silently unwatched.
func parseNamespaces(v string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, ns := range strings.Split(v, ",") {
		ns = strings.TrimSpace(ns)
		if ns == "" {
			continue
		}
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return nil, fmt.Errorf("namespace %q: %s", ns, strings.Join(errs, "; "))
		}
		if seen[ns] {
			return nil, fmt.Errorf("namespace %q listed twice", ns)
		}
		seen[ns] = true
		out = append(out, ns)
	}
	return out, nil
}

// parseServiceAccounts reads namespace:name pairs (the part of a service
// account's user name after "system:serviceaccount:").
func parseServiceAccounts(v string) ([]string, error) {
	var out []string
	for _, sa := range strings.Split(v, ",") {
		sa = strings.TrimSpace(sa)
		if sa == "" {
			continue
		}
		ns, name, ok := strings.Cut(sa, ":")
		if !ok {
			return nil, fmt.Errorf("service account %q: want namespace:name", sa)
		}
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return nil, fmt.Errorf("service account %q: namespace: %s", sa, strings.Join(errs, "; "))
		}
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
			return nil, fmt.Errorf("service account %q: name: %s", sa, strings.Join(errs, "; "))
		}
		if slices.Contains(out, sa) {
			return nil, fmt.Errorf("service account %q listed twice", sa)
		}
		out = append(out, sa)
	}
	return out, nil
}

// metricsOptions serves plain HTTP by default. With --metrics-secure every
// scrape is authenticated (TokenReview) and authorized (SubjectAccessReview on
// the /metrics non-resource URL) by the API server; the manager then needs
// create on tokenreviews and subjectaccessreviews, which the chart grants only
// when metrics.secure is on. Without a certificate directory the server uses
// a self-signed certificate.
func metricsOptions(o options) metricsserver.Options {
	opts := metricsserver.Options{BindAddress: o.metricsAddr}
	if o.metricsSecure {
		opts.SecureServing = true
		opts.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	return opts
}

// cacheOptions restricts the informers to --watch-namespace when it is set,
// so that the manager neither lists nor watches objects elsewhere, and the
// RBAC can be a Role per watched namespace. Secrets are cached as metadata
// only (--watch-secrets); their values are read with the API reader. Managed
// fields are dropped from every cached object: at 1,000 resources and as many
// Secrets they would be most of the heap, and nothing reads them.
func cacheOptions(o options) cache.Options {
	opts := cache.Options{SyncPeriod: &o.syncPeriod, DefaultTransform: cache.TransformStripManagedFields()}
	if len(o.watchNamespaces) > 0 {
		opts.DefaultNamespaces = make(map[string]cache.Config, len(o.watchNamespaces))
		for _, ns := range o.watchNamespaces {
			opts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	if o.watchLabelSelector != "" {
		sel, _ := labels.Parse(o.watchLabelSelector) // validated in parseFlags
		opts.ByObject = map[client.Object]cache.ByObject{&recoveryv1.ProjectionRecovery{}: {Label: sel}}
	}
	return opts
}

// defaultOwner is unique per process: two managers on one host must never
// share a lease identity, or the fence could not tell them apart.
func defaultOwner() string {
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%s", host, hex.EncodeToString(b[:]))
}
