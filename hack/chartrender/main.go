// Command chartrender renders one Helm chart for many clusters in one process, as
// `helm template` renders it for one: the controller's render worker runs it (one process
// start instead of one per cluster; docs/charts.md). Helm's own packages, from the module
// pinned in go.mod, do the rendering, client-only: no cluster, no network, no plugins.
//
// Input (stdin, JSON): {"chart": PATH, "maxBytes": N, "renders": [{"name", "namespace",
// "includeCRDs", "kubeVersion", "apiVersions": [...], "valueFiles": [PATH...]}]}.
// Output (stdout): one JSON object per render, in order, each on its own line:
// {"manifest": TEXT} as `helm template` prints it (hooks left out), or {"error": TEXT}.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/loader"
	"helm.sh/helm/v4/pkg/cli/values"
	"helm.sh/helm/v4/pkg/getter"
	release "helm.sh/helm/v4/pkg/release/v1"
)

type render struct {
	Name        string   `json:"name"`
	Namespace   string   `json:"namespace"`
	IncludeCRDs bool     `json:"includeCRDs"`
	KubeVersion string   `json:"kubeVersion"`
	APIVersions []string `json:"apiVersions"`
	ValueFiles  []string `json:"valueFiles"`
}

type request struct {
	Chart    string   `json:"chart"`
	MaxBytes int      `json:"maxBytes"`
	Renders  []render `json:"renders"`
}

type answer struct {
	Manifest string `json:"manifest,omitempty"`
	Error    string `json:"error,omitempty"`
}

func main() {
	var req request
	if err := json.NewDecoder(bufio.NewReader(os.Stdin)).Decode(&req); err != nil {
		fmt.Fprintf(os.Stderr, "chartrender: the request does not parse: %v\n", err)
		os.Exit(2)
	}
	archive, err := os.ReadFile(req.Chart)
	if err != nil {
		fmt.Fprintf(os.Stderr, "chartrender: %v\n", err)
		os.Exit(2)
	}
	out := bufio.NewWriter(os.Stdout)
	encoder := json.NewEncoder(out)
	for _, r := range req.Renders {
		manifest, err := one(archive, r)
		a := answer{Manifest: manifest}
		if err != nil {
			a = answer{Error: err.Error()}
		} else if req.MaxBytes > 0 && len(manifest) > req.MaxBytes {
			a = answer{Error: fmt.Sprintf("printed more than %d bytes", req.MaxBytes)}
		}
		if err := encoder.Encode(a); err != nil {
			os.Exit(1)
		}
	}
	if err := out.Flush(); err != nil {
		os.Exit(1)
	}
}

// one renders the chart for one cluster: what `helm template NAME CHART --namespace NS
// [--include-crds] [--kube-version V] [--api-versions A]... [--values F]...` prints,
// hooks left out. The chart is loaded again each time: rendering may change it.
func one(archive []byte, r render) (string, error) {
	loaded, err := loader.LoadArchive(bytes.NewReader(archive))
	if err != nil {
		return "", err
	}
	accessor, err := chart.NewAccessor(loaded)
	if err != nil {
		return "", err
	}
	if kind := accessor.MetadataAsMap()["Type"]; kind != "" && kind != "application" && kind != nil {
		return "", fmt.Errorf("%v charts are not installable", kind)
	}
	if req := accessor.MetaDependencies(); len(req) > 0 {
		if err := action.CheckDependencies(loaded, req); err != nil {
			return "", fmt.Errorf("the chart's dependencies are not in its charts/ directory: %w", err)
		}
	}
	vals, err := (&values.Options{ValueFiles: r.ValueFiles}).MergeValues(getter.Providers{})
	if err != nil {
		return "", err
	}
	client := action.NewInstall(action.NewConfiguration())
	client.DryRunStrategy = action.DryRunClient
	client.Replace = true
	client.ReleaseName = r.Name
	client.Namespace = r.Namespace
	client.IncludeCRDs = r.IncludeCRDs
	client.APIVersions = common.VersionSet(r.APIVersions)
	if r.KubeVersion != "" {
		version, err := common.ParseKubeVersion(r.KubeVersion)
		if err != nil {
			return "", fmt.Errorf("invalid kube version %q: %w", r.KubeVersion, err)
		}
		client.KubeVersion = version
	}
	released, err := client.RunWithContext(context.Background(), loaded, vals)
	if err != nil {
		return "", err
	}
	rel, ok := released.(*release.Release)
	if !ok {
		return "", fmt.Errorf("unexpected release type %T", released)
	}
	return strings.TrimSpace(rel.Manifest) + "\n", nil
}
