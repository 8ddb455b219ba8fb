//go:build faultinject

package main

import (
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/engine/faultinject"
	"github.com/sluicehq/sluice/loader"
)

// The fault-injecting build (go build -tags faultinject) adds
// --inject-fault, for the reliability tests and the soak:
//
//	--inject-fault KIND@STEP[,STEP...]   fail, panic or device_lost at those forward steps
//	--inject-fault KIND/N                 ... at every N-th step
//	--inject-fault slow/N:DURATION        every N-th step takes DURATION longer
//
// Release builds have no such flag (faults_off.go).
func addFaultFlag(fs *flag.FlagSet, lo *loader.Options) {
	fs.Func("inject-fault", "test builds only: KIND@STEP,... or KIND/N (fail, panic, device_lost, slow/N:DUR)", func(v string) error {
		plan, err := parseFaultPlan(v)
		if err != nil {
			return err
		}
		lo.WrapModel = func(m engine.Model) engine.Model { return faultinject.Wrap(m, plan) }
		return nil
	})
}

func parseFaultPlan(v string) (faultinject.Plan, error) {
	kinds := map[string]faultinject.Kind{"fail": faultinject.Fail, "panic": faultinject.Panic, "device_lost": faultinject.DeviceLost, "slow": faultinject.None}
	if kind, steps, ok := strings.Cut(v, "@"); ok {
		k, known := kinds[kind]
		if !known || kind == "slow" {
			return nil, fmt.Errorf("--inject-fault %q: KIND@STEPS takes fail, panic or device_lost", v)
		}
		var list []int
		for _, s := range strings.Split(steps, ",") {
			n, err := strconv.Atoi(s)
			if err != nil || n < 1 {
				return nil, fmt.Errorf("--inject-fault %q: bad step %q", v, s)
			}
			list = append(list, n)
		}
		return faultinject.At(faultinject.Fault{Kind: k}, list...), nil
	}
	kind, every, ok := strings.Cut(v, "/")
	k, known := kinds[kind]
	if !ok || !known {
		return nil, fmt.Errorf("--inject-fault %q: want KIND@STEPS or KIND/N", v)
	}
	f := faultinject.Fault{Kind: k}
	if kind == "slow" {
		var d string
		if every, d, ok = strings.Cut(every, ":"); !ok {
			return nil, fmt.Errorf("--inject-fault %q: slow/N:DURATION", v)
		}
		var err error
		if f.Delay, err = time.ParseDuration(d); err != nil {
			return nil, fmt.Errorf("--inject-fault %q: %w", v, err)
		}
	}
	n, err := strconv.Atoi(every)
	if err != nil || n < 1 {
		return nil, fmt.Errorf("--inject-fault %q: bad N %q", v, every)
	}
	return faultinject.Every(n, f), nil
}
