// Command k8s-semantics answers questions about quantities, label selectors, taints and
// tolerations, and Pod Security Standards, with Kubernetes' own code (the apimachinery, api
// and pod-security-admission modules pinned in ../go.mod). The Python tests compare
// api/quantity.py, api/selectors.py, api/taints.py and propagator/tenancy/podsecurity.py
// with it, one JSON question per stdin line, one JSON answer per stdout line.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/klog/v2"
	psaapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
)

// evaluator holds Pod Security Admission's checks, built once.
var evaluator = func() policy.Evaluator {
	e, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		panic(err)
	}
	return e
}()

type question struct {
	Op         string                `json:"op"`
	Quantity   json.RawMessage       `json:"quantity,omitempty"`
	Other      string                `json:"other,omitempty"`
	Selector   *metav1.LabelSelector `json:"selector,omitempty"`
	Labels     map[string]string     `json:"labels,omitempty"`
	Key        string                `json:"key,omitempty"`
	Operator   string                `json:"operator,omitempty"`
	Values     []string              `json:"values,omitempty"`
	Toleration *v1.Toleration        `json:"toleration,omitempty"`
	Taint      *v1.Taint             `json:"taint,omitempty"`
	Level      string                `json:"level,omitempty"`
	Pod        json.RawMessage       `json:"pod,omitempty"`
}

// violation is one failed Pod Security check, as the admission's message shows it.
type violation struct {
	Reason string `json:"reason"`
	Detail string `json:"detail"`
}

type answer struct {
	Error     string   `json:"error,omitempty"`
	Errors    []string `json:"errors,omitempty"`
	Value     string   `json:"value,omitempty"`
	Format    string   `json:"format,omitempty"`
	Canonical string   `json:"canonical,omitempty"`
	Cmp       int      `json:"cmp"`
	Query     string   `json:"query,omitempty"`
	Matches   bool     `json:"matches"`
	// Violations: the failed Pod Security checks (none: the pod is allowed).
	Violations []violation `json:"violations,omitempty"`
}

// quantity reads a quantity the way the API server reads one from a JSON object.
func quantity(raw json.RawMessage) (resource.Quantity, error) {
	var q resource.Quantity
	err := json.Unmarshal(raw, &q)
	return q, err
}

func answerOf(q question) answer {
	switch q.Op {
	case "quantity":
		parsed, err := quantity(q.Quantity)
		if err != nil {
			return answer{Error: err.Error()}
		}
		// A fresh quantity of the same value and format: the canonical string, not the
		// input string that ParseQuantity may keep.
		canonical := resource.NewDecimalQuantity(*parsed.AsDec(), parsed.Format)
		return answer{Value: parsed.AsDec().String(), Format: string(parsed.Format), Canonical: canonical.String()}
	case "cmp":
		a, err := quantity(q.Quantity)
		if err != nil {
			return answer{Error: err.Error()}
		}
		b, err := resource.ParseQuantity(q.Other)
		if err != nil {
			return answer{Error: err.Error()}
		}
		return answer{Cmp: a.Cmp(b)}
	case "selector":
		var errs []string
		for _, e := range metav1validation.ValidateLabelSelector(q.Selector, metav1validation.LabelSelectorValidationOptions{}, field.NewPath("selector")) {
			errs = append(errs, e.Error())
		}
		selector, err := metav1.LabelSelectorAsSelector(q.Selector)
		if err != nil {
			return answer{Errors: errs, Error: err.Error()}
		}
		return answer{Errors: errs, Query: selector.String(), Matches: selector.Matches(labels.Set(q.Labels))}
	case "requirement":
		r, err := labels.NewRequirement(q.Key, selection.Operator(q.Operator), q.Values)
		if err != nil {
			return answer{Error: err.Error()}
		}
		return answer{Query: r.String(), Matches: r.Matches(labels.Set(q.Labels))}
	case "parse-selector":
		selector, err := labels.Parse(q.Other)
		if err != nil {
			return answer{Error: err.Error()}
		}
		return answer{Query: selector.String(), Matches: selector.Matches(labels.Set(q.Labels))}
	case "pod-security":
		// A Pod as the API server decodes it; its level at the latest policy version, as
		// the label pod-security.kubernetes.io/enforce-version defaults to.
		var pod v1.Pod
		if err := json.Unmarshal(q.Pod, &pod); err != nil {
			return answer{Error: err.Error()}
		}
		level, err := psaapi.ParseLevel(q.Level)
		if err != nil {
			return answer{Error: err.Error()}
		}
		lv := psaapi.LevelVersion{Level: level, Version: psaapi.LatestVersion()}
		var found []violation
		for _, r := range evaluator.EvaluatePod(lv, &pod.ObjectMeta, &pod.Spec) {
			if !r.Allowed {
				found = append(found, violation{Reason: r.ForbiddenReason, Detail: r.ForbiddenDetail})
			}
		}
		return answer{Violations: found}
	case "tolerates":
		return answer{Matches: q.Toleration.ToleratesTaint(klog.Background(), q.Taint, true)}
	}
	return answer{Error: fmt.Sprintf("unknown op %q", q.Op)}
}

func main() {
	klog.SetOutput(os.Stderr)
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<24)
	out := bufio.NewWriter(os.Stdout)
	encoder := json.NewEncoder(out)
	for in.Scan() {
		var q question
		if err := json.Unmarshal(in.Bytes(), &q); err != nil {
			fmt.Fprintf(os.Stderr, "k8s-semantics: %v\n", err)
			os.Exit(2)
		}
		if err := encoder.Encode(answerOf(q)); err != nil {
			fmt.Fprintf(os.Stderr, "k8s-semantics: %v\n", err)
			os.Exit(2)
		}
		out.Flush()
	}
}
