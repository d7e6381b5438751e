package capturesuite

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/ipfence/ipfence/capture/provider"
)

// The cloud as a second wall: on Azure and OCI the drivers keep each
// address's highest epoch in the cloud's tags and refuse an action older
// than it (capture/provider/epochtag), so that with the gate off a zombie
// is refused by the cloud, where on AWS it executes. The fence checker
// reports both sides: the stale actions the record shows executed, and the
// stale actions refused, counted from the nodes' own lines (an action that
// failed with provider.ErrStale, each once however often its row was
// retried) beside the simulator's count of stale writes it answered with
// 412 (GET /admin/stale).

// wallCounts are a run's refusals by the cloud.
type wallCounts struct {
	// on says the provider has the wall (Azure, OCI).
	on bool
	// refused are the stale actions the nodes report the cloud refused;
	// examples a few of them.
	refused  int
	examples []string
	// writes412 are the stale writes the simulator refused with 412.
	writes412 uint64
	err       error
}

// staleWrites412 reads the simulator's count of stale writes it refused;
// on is false for a dialect without the wall (EC2's).
func (c *cluster) staleWrites412(ctx context.Context) (on bool, n uint64, err error) {
	if c.cloud != "azure" && c.cloud != "oci" {
		return false, 0, nil
	}
	var out struct {
		Refused uint64 `json:"refused"`
	}
	if err := c.simGet(ctx, "/admin/stale", &out); err != nil {
		return true, 0, fmt.Errorf("the simulator's count of stale writes refused: %w", err)
	}
	return true, out.Refused, nil
}

// logField matches one key=value of a node's log line (slog's text form).
var logField = regexp.MustCompile(`(\w+)=("(?:[^"\\]|\\.)*"|\S+)`)

// refusedByCloud counts, in the nodes' logs under dir/logs, the distinct
// actions (node, kind, address, target, epoch) that failed because the
// cloud's epoch record was newer: the error is provider.ErrStale and names
// the action's own address and epoch (an error of a batch names only the
// requests refused, though every row of the batch logs it).
func refusedByCloud(dir string) (int, []string, error) {
	logs, err := filepath.Glob(filepath.Join(dir, "logs", "n*.log"))
	if err != nil {
		return 0, nil, err
	}
	seen := map[string]bool{}
	var examples []string
	for _, f := range logs {
		file, err := os.Open(f)
		if err != nil {
			return 0, nil, err
		}
		sc := bufio.NewScanner(file)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if !strings.Contains(line, `msg="action failed"`) || !strings.Contains(line, provider.ErrStale.Error()) {
				continue
			}
			kv := map[string]string{}
			for _, m := range logField.FindAllStringSubmatch(line, -1) {
				v := m[2]
				if u, err := strconv.Unquote(v); err == nil {
					v = u
				}
				kv[m[1]] = v
			}
			if !strings.Contains(kv["err"], kv["address"]+" at epoch "+kv["epoch"]+" ") {
				continue
			}
			k := strings.Join([]string{kv["node"], kv["kind"], kv["address"], kv["target"], kv["epoch"]}, " ")
			if !seen[k] {
				seen[k] = true
				examples = append(examples, fmt.Sprintf("%s: %s %s on %s at epoch %s", kv["node"], kv["kind"], kv["address"], kv["target"], kv["epoch"]))
			}
		}
		err = sc.Err()
		file.Close()
		if err != nil {
			return 0, nil, fmt.Errorf("%s: %w", f, err)
		}
	}
	slices.Sort(examples)
	return len(seen), examples, nil
}

// countWall reads a run's refusals by the cloud.
func (c *cluster) countWall(ctx context.Context) wallCounts {
	var w wallCounts
	w.on, w.writes412, w.err = c.staleWrites412(ctx)
	if !w.on || w.err != nil {
		return w
	}
	w.refused, w.examples, w.err = refusedByCloud(c.dir)
	return w
}
