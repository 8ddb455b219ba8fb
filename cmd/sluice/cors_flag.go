package main

import "strings"

// originList is the repeatable --cors-origin flag. A value may also hold
// several origins separated by commas (origins never contain one), so the
// single SLUICE_CORS_ORIGIN variable can name them all.
type originList []string

func (o *originList) String() string { return strings.Join(*o, ",") }

func (o *originList) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*o = append(*o, s)
		}
	}
	return nil
}
