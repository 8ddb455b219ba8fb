package nvml

import (
	"fmt"
	"io"
	"math"
	"text/tabwriter"
)

// Inspect prints one line per GPU for `sluice inspect --gpus`, or one line
// saying why there is none. Like Register, a missing driver is not an error.
func Inspect(w io.Writer, lib Library) error {
	if err := lib.Init(); err != nil {
		_, werr := fmt.Fprintf(w, "no NVIDIA GPU: %v\n", err)
		return werr
	}
	defer lib.Shutdown()
	gpus, err := Read(lib)
	if err != nil {
		return err
	}
	if len(gpus) == 0 {
		_, werr := fmt.Fprintln(w, "no NVIDIA GPU: NVML lists 0 devices")
		return werr
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "gpu\tname\tutil\tmemory used/total\tpower\ttemp\tSM clock\tuuid")
	for _, g := range gpus {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s / %s\t%s\t%s\t%s\t%s\n", g.Index, g.Name,
			figure(g.Utilization*100, "%.0f%%"), figure(g.MemoryUsed/(1<<30), "%.1f GiB"),
			figure(g.MemoryTotal/(1<<30), "%.1f GiB"), figure(g.PowerWatts, "%.0f W"),
			figure(g.TempCelsius, "%.0f C"), figure(g.SMClockHz/1e6, "%.0f MHz"), g.UUID)
	}
	return tw.Flush()
}

func figure(v float64, format string) string {
	if math.IsNaN(v) {
		return "n/a"
	}
	return fmt.Sprintf(format, v)
}
