package bot

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/bwmarrin/discordgo"
)

// DefaultAPIURL is Discord's REST base, the default of DISCORD_API_URL.
const DefaultAPIURL = "https://discord.com/api/v10"

// rewriteTransport sends discordgo's REST calls to another base URL. discordgo
// builds every URL from its package-level EndpointAPI; rewriting at the
// transport keeps that global untouched, so two sessions in one process (the
// text and voice bridges under `clankie up`) can each have their own base.
type rewriteTransport struct {
	from string   // discordgo's own base, with trailing slash
	to   *url.URL // the configured base
	next http.RoundTripper
}

// NewRESTTransport returns a RoundTripper that rewrites discordgo's REST base
// to apiURL (for a rate-limit proxy or a local fake).
func NewRESTTransport(apiURL string, next http.RoundTripper) (http.RoundTripper, error) {
	to, err := url.Parse(strings.TrimRight(apiURL, "/"))
	if err != nil || to.Host == "" || (to.Scheme != "http" && to.Scheme != "https") {
		return nil, fmt.Errorf("DISCORD_API_URL must be an http(s) URL such as %s", DefaultAPIURL)
	}
	if next == nil {
		next = http.DefaultTransport
	}
	return &rewriteTransport{from: discordgo.EndpointAPI, to: to, next: next}, nil
}

func (t *rewriteTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	u := r.URL.String()
	if !strings.HasPrefix(u, t.from) {
		return t.next.RoundTrip(r)
	}
	rest := strings.TrimPrefix(u, t.from)
	nu, err := url.Parse(t.to.String() + "/" + rest)
	if err != nil {
		return nil, err
	}
	r2 := r.Clone(r.Context())
	r2.URL = nu
	r2.Host = nu.Host
	return t.next.RoundTrip(r2)
}
