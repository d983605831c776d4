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

// Command image builds the projection-recovery container image without a
// Docker daemon or a base image: static manager and member binaries, the CA
// bundle and a non-root user on an empty base, written as an image tarball.
//
//	go run ./hack/image --out bin/image --version v0.1.0   (what `make image` runs)
//
// It prints the image reference, its digest and its size.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// TarballName is the file `make image` writes under --out.
const TarballName = "projection-recovery.tar"

func main() {
	err := run(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	out := fs.String("out", "bin/image", "directory the tarball is written to")
	root := fs.String("root", ".", "repository checkout to build from")
	repo := fs.String("repository", DefaultRepository, "image repository")
	tag := fs.String("tag", "", "image tag (default: the chart's appVersion)")
	version := fs.String("version", "", "version stamped into the binaries (default: the tag)")
	source := fs.String("source", "https://github.com/projection-recovery/projection-recovery", "source repository URL (OCI label)")
	caFile := fs.String("ca-file", "/etc/ssl/certs/ca-certificates.crt", "CA bundle copied into the image")
	arch := fs.String("arch", runtime.GOARCH, "GOARCH of the binaries and the image")
	flavor := fs.String("flavor", "projection-recovery", "image to build: projection-recovery, or the e2e node's pause or postgres (docs/e2e.md)")
	reference := fs.String("reference", "", "full image reference (default: --repository:--tag)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	s := Spec{Root: *root, Repository: *repo, Tag: *tag, Version: *version, Source: *source, CAFile: *caFile, Arch: *arch}
	if s.Tag == "" {
		v, err := ChartAppVersion(s.Root)
		if err != nil {
			return err
		}
		s.Tag = v
	}
	if s.Version == "" {
		s.Version = s.Tag
	}
	s.Revision = gitOutput(s.Root, "rev-parse", "HEAD")
	s.Created = created(s.Root)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	build, file := Build, TarballName
	switch *flavor {
	case "projection-recovery":
	case "pause":
		build, file = BuildPause, "pause.tar"
	case "postgres":
		build, file = BuildPostgres, "postgres.tar"
	default:
		return fmt.Errorf("unknown --flavor %q (projection-recovery, pause, postgres)", *flavor)
	}
	if *reference != "" {
		s.Repository, s.Tag, _ = strings.Cut(*reference, ":")
	}
	img, err := build(ctx, s)
	if err != nil {
		return err
	}
	path := filepath.Join(*out, file)
	if err := Write(path, s.Reference(), img); err != nil {
		return err
	}
	return report(path, s, img)
}

// created is the build's timestamp: SOURCE_DATE_EPOCH when set (the
// reproducible-builds convention), else the commit time, else the epoch, so
// rebuilding one commit yields the same digest.
func created(root string) time.Time {
	for _, v := range []string{os.Getenv("SOURCE_DATE_EPOCH"), gitOutput(root, "log", "-1", "--format=%ct")} {
		if sec, err := strconv.ParseInt(v, 10, 64); err == nil {
			return time.Unix(sec, 0).UTC()
		}
	}
	return time.Unix(0, 0).UTC()
}

func report(path string, s Spec, img v1.Image) error {
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	var compressed, uncompressed int64
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	for _, l := range layers {
		n, err := l.Size()
		if err != nil {
			return err
		}
		compressed += n
		rc, err := l.Uncompressed()
		if err != nil {
			return err
		}
		u, err := countBytes(rc)
		if err != nil {
			return err
		}
		uncompressed += u
	}
	fmt.Printf("image: %s\n", s.Reference())
	fmt.Printf("digest: %s\n", digest)
	fmt.Printf("version: %s (revision %s)\n", s.Version, s.Revision)
	fmt.Printf("size: %.1f MiB compressed, %.1f MiB uncompressed\n", float64(compressed)/(1<<20), float64(uncompressed)/(1<<20))
	fmt.Printf("tarball: %s (load with: docker load -i %s, or push with: crane push %s %s)\n", path, path, path, s.Reference())
	return nil
}
