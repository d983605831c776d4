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

// Command member is the reference member: a deterministic matching engine
// over a persisted command log, driven by a seeded workload. It serves the
// pinned v1 source contract (GET /recon/catchup-events, FR-APR01..04; GET
// /recon/descriptor) and publishes every event's exact wire bytes on NATS,
// optionally dropping some (--drop-rate) to create the gaps recovery closes.
//
//	member --log-dir /tmp/member --scope demo --rate 50 --drop-rate 0.05
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/projection-recovery/projection-recovery/internal/reference/member"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/projection-recovery/projection-recovery/internal/reference/engine"
)

type config struct {
	logDir, scope, engineID, instruments string
	accounts                             int
	seed                                 uint64
	rate                                 float64
	cancelRatio, heartbeatRatio          float64
	openings, fsync, noCache             bool
	deterministicTime                    bool
	maxCommands                          int64
	listen, token, tokenFile             string
	natsURL, natsListen, natsSubject     string
	dropRate                             float64
	dropSeed                             uint64
	logFormat                            string
	showVersion                          bool
}

// version is the release of this binary, stamped at build time with
// -ldflags "-X main.version=v1.2.3" (make image does); "dev" unstamped.
var version = "dev"

// errVersion is returned by parseFlags for --version, as flag.ErrHelp is for
// --help: main answers it on stdout and exits 0.
var errVersion = errors.New("version requested")

func parseFlags(args []string) (config, error) {
	var c config
	fs := flag.NewFlagSet("member", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: member [flags]\n\nReference member: matching engine over a command log, serving the catch-up\ncontract over HTTP and the live event feed over NATS.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	fs.StringVar(&c.logDir, "log-dir", "./member-data", "command log directory (created if empty; reopened as a new recording term otherwise)")
	fs.StringVar(&c.scope, "scope", "default", "projection scope (part of the descriptor; default NATS subject projection.events.<scope>)")
	fs.StringVar(&c.engineID, "engine-id", "reference-engine-v1", "engine id (part of the descriptor)")
	fs.StringVar(&c.instruments, "instruments", "BTC-USD,ETH-USD", "comma-separated instruments (part of the descriptor)")
	fs.IntVar(&c.accounts, "accounts", 4, "number of workload accounts acct-1..acct-N")
	fs.Uint64Var(&c.seed, "seed", 1, "workload seed (same seed, same commands)")
	fs.Float64Var(&c.rate, "rate", 20, "commands per second (0 = as fast as possible)")
	fs.Float64Var(&c.cancelRatio, "cancel-ratio", 0.1, "fraction of commands that cancel an earlier order")
	fs.Float64Var(&c.heartbeatRatio, "heartbeat-ratio", 0.05, "fraction of zero-output heartbeat commands")
	fs.BoolVar(&c.openings, "openings", true, "start a new log with one proven opening per (account, instrument)")
	fs.BoolVar(&c.fsync, "fsync", true, "fsync every append and commit")
	fs.BoolVar(&c.noCache, "no-replay-cache", false, "replay from genesis for every page (NFR-APR02 literally) instead of resuming the cached replay")
	fs.BoolVar(&c.deterministicTime, "deterministic-time", false, "stamp commands with a seeded synthetic clock instead of the wall clock")
	fs.Int64Var(&c.maxCommands, "max-commands", 0, "stop generating once the log holds this many commands (0 = never); serving continues")
	fs.StringVar(&c.listen, "listen", "127.0.0.1:8090", "HTTP listen address of the source contract")
	fs.StringVar(&c.token, "token", "", "require this bearer token on HTTP requests (prefer --token-file)")
	fs.StringVar(&c.tokenFile, "token-file", "", "file holding the bearer token")
	fs.StringVar(&c.natsURL, "nats-url", "", "publish to this external NATS server instead of the embedded one")
	fs.StringVar(&c.natsListen, "nats-listen", "127.0.0.1:4222", "listen address of the embedded NATS server, port -1 = random (ignored with --nats-url; empty = no NATS)")
	fs.StringVar(&c.natsSubject, "nats-subject", "", "live feed subject (default projection.events.<scope>)")
	fs.Float64Var(&c.dropRate, "drop-rate", 0, "probability in [0,1] that an event is not published (it stays in the log)")
	fs.Uint64Var(&c.dropSeed, "drop-seed", 1, "seed of the drop decisions")
	fs.StringVar(&c.logFormat, "log-format", "text", "log format: text or json")
	fs.BoolVar(&c.showVersion, "version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if c.showVersion {
		return c, errVersion
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if c.dropRate < 0 || c.dropRate > 1 {
		return c, fmt.Errorf("--drop-rate %v outside [0,1]", c.dropRate)
	}
	if c.rate < 0 {
		return c, fmt.Errorf("--rate must be >= 0")
	}
	if c.tokenFile != "" {
		b, err := os.ReadFile(c.tokenFile)
		if err != nil {
			return c, fmt.Errorf("--token-file: %w", err)
		}
		c.token = strings.TrimSpace(string(b))
	}
	if c.natsSubject == "" {
		c.natsSubject = member.DefaultSubject(c.scope)
	}
	return c, nil
}

func main() {
	cfg, err := parseFlags(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if errors.Is(err, errVersion) {
		fmt.Println("member " + version)
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "member:", err)
		os.Exit(2)
	}
	var h slog.Handler = slog.NewTextHandler(os.Stderr, nil)
	if cfg.logFormat == "json" {
		h = slog.NewJSONHandler(os.Stderr, nil)
	}
	logger := slog.New(h)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg, logger, nil); err != nil {
		logger.Error("member failed", "err", err)
		os.Exit(1)
	}
}

// openLog creates the log or reopens it as a new recording term, refusing a
// directory whose descriptor differs from the flags (its outputs would be
// served under the wrong identity).
func openLog(cfg config) (*engine.Log, bool, error) {
	desc := engine.Descriptor{EngineID: cfg.engineID, Scope: cfg.scope, Instruments: splitList(cfg.instruments)}.Normalize()
	opts := engine.LogOptions{Sync: cfg.fsync}
	if _, err := os.Stat(filepath.Join(cfg.logDir, "descriptor.json")); err == nil {
		// Compare before opening: Open starts a new recording term.
		got, err := engine.ReadDescriptor(cfg.logDir)
		if err != nil {
			return nil, false, err
		}
		if got.Hash() != desc.Hash() {
			return nil, false, fmt.Errorf("log %s has descriptor %s, flags describe %s", cfg.logDir, got.Canonical(), desc.Canonical())
		}
		l, err := engine.Open(cfg.logDir, opts)
		if err != nil {
			return nil, false, fmt.Errorf("reopen log %s: %w", cfg.logDir, err)
		}
		return l, false, nil
	}
	l, err := engine.Create(cfg.logDir, desc, opts)
	if err != nil {
		return nil, false, fmt.Errorf("create log %s: %w", cfg.logDir, err)
	}
	return l, true, nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return slices.Compact(out)
}

// connectNATS starts the embedded server (unless an external URL is given)
// and connects to it. Returns a nil connection when NATS is disabled.
func connectNATS(cfg config, logger *slog.Logger) (*nats.Conn, string, func(), error) {
	url := cfg.natsURL
	var ns *server.Server
	if url == "" {
		if cfg.natsListen == "" {
			return nil, "", func() {}, nil
		}
		host, portStr, err := net.SplitHostPort(cfg.natsListen)
		if err != nil {
			return nil, "", nil, fmt.Errorf("--nats-listen: %w", err)
		}
		port, err := strconv.Atoi(portStr)
		if err != nil {
			return nil, "", nil, fmt.Errorf("--nats-listen port: %w", err)
		}
		ns, err = server.NewServer(&server.Options{Host: host, Port: port, NoSigs: true, NoLog: true})
		if err != nil {
			return nil, "", nil, fmt.Errorf("embedded NATS: %w", err)
		}
		go ns.Start()
		if !ns.ReadyForConnections(10 * time.Second) {
			ns.Shutdown()
			return nil, "", nil, fmt.Errorf("embedded NATS on %s not ready", cfg.natsListen)
		}
		url = ns.ClientURL()
		logger.Info("embedded NATS listening", "url", url)
	}
	nc, err := nats.Connect(url, nats.Name("projection-recovery-member"), nats.MaxReconnects(-1))
	if err != nil {
		if ns != nil {
			ns.Shutdown()
		}
		return nil, "", nil, fmt.Errorf("connect NATS %s: %w", url, err)
	}
	return nc, url, func() {
		_ = nc.Flush()
		nc.Close()
		if ns != nil {
			ns.Shutdown()
		}
	}, nil
}

// run serves until ctx is done. onReady, when set, receives the HTTP address
// and the NATS URL ("" without NATS) once both accept connections.
func run(ctx context.Context, cfg config, logger *slog.Logger, onReady func(httpAddr, natsURL string)) error {
	l, created, err := openLog(cfg)
	if err != nil {
		return err
	}
	defer l.Close()
	desc := l.Descriptor()
	fmt.Printf("descriptorHash=%s\n", desc.Hash())
	logger.Info("command log open", "dir", cfg.logDir, "created", created, "term", l.Term(),
		"committedSeq", l.Committed(), "descriptorHash", desc.Hash(), "descriptor", string(desc.Canonical()))

	wcfg := engine.WorkloadConfig{Accounts: cfg.accounts, Instruments: desc.Instruments, CancelRatio: cfg.cancelRatio,
		HeartbeatRatio: cfg.heartbeatRatio, Openings: created && cfg.openings, IDPrefix: fmt.Sprintf("t%d-", l.Term())}
	if !cfg.deterministicTime {
		wcfg.Clock = time.Now
	}
	w, err := engine.NewWorkload(cfg.seed+uint64(l.Term()), wcfg)
	if err != nil {
		return err
	}
	nc, natsURL, closeNATS, err := connectNATS(cfg, logger)
	if err != nil {
		return err
	}
	defer closeNATS()
	var pub member.Publisher
	if nc != nil {
		pub = nc
	}
	var interval time.Duration
	if cfg.rate > 0 {
		interval = time.Duration(float64(time.Second) / cfg.rate)
	}
	m, err := member.NewMember(member.MemberConfig{Log: l, Workload: w, Publisher: pub, Subject: cfg.natsSubject,
		DropRate: cfg.dropRate, DropSeed: cfg.dropSeed, Interval: interval, MaxCommands: cfg.maxCommands, Logger: logger})
	if err != nil {
		return err
	}
	handler := member.NewHandler(l, member.HandlerOptions{Token: cfg.token, DisableCache: cfg.noCache, Logger: logger})
	ln, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		return fmt.Errorf("listen %s: %w", cfg.listen, err)
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	logger.Info("serving source contract", "addr", ln.Addr().String(), "natsSubject", cfg.natsSubject,
		"dropRate", cfg.dropRate, "replayCache", !cfg.noCache, "auth", cfg.token != "")

	if onReady != nil {
		onReady(ln.Addr().String(), natsURL)
	}
	errc := make(chan error, 2)
	go func() {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			errc <- fmt.Errorf("http: %w", err)
		}
	}()
	go func() {
		if err := m.Run(ctx); err != nil {
			errc <- err
		}
	}()
	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			logger.Info("shutting down", "committedSeq", l.Committed())
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			return srv.Shutdown(sctx)
		case err := <-errc:
			return err
		case <-tick.C:
			s, hs := m.Stats(), handler.Stats()
			logger.Info("member stats", "committedSeq", l.Committed(), "published", s.Published, "dropped", s.Dropped,
				"publishErrors", s.PublishErrors, "genesisReplays", hs.GenesisReplays, "commandsReplayed", hs.CommandsReplayed)
		}
	}
}
