package main

import "strings"

// commaList is a repeatable flag of origins (--cors-origin) or host names
// (--allowed-hosts). A value may also hold several separated by commas
// (neither ever contains one), so the single SLUICE_CORS_ORIGIN or
// SLUICE_ALLOWED_HOSTS variable can name them all.
type commaList []string

func (o *commaList) String() string { return strings.Join(*o, ",") }

func (o *commaList) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*o = append(*o, s)
		}
	}
	return nil
}
