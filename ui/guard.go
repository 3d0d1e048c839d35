package ui

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net"
	"net/http"
	"strings"
)

// What guards the dashboard: the Host check (DNS rebinding), the CSRF
// token and its cookie, and signed flash messages.

// allowedHost reports whether a request naming hostport in its Host
// header may be served.
func (h *handler) allowedHost(hostport string) bool {
	if h.anyHost {
		return true
	}
	host := hostport
	if hp, _, err := net.SplitHostPort(hostport); err == nil {
		host = hp
	}
	host = normalHost(host)
	return h.hosts[host] || IsLoopbackHost(host)
}

// IsLoopbackHost reports whether host (no port) is "localhost" or a
// loopback address: a name no one else's DNS can point at this machine.
func IsLoopbackHost(host string) bool {
	host = normalHost(host)
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// normalHost lowercases host and drops a trailing dot and IPv6 brackets.
func normalHost(host string) string {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		host = host[1 : len(host)-1]
	}
	return host
}

// The CSRF token is an HMAC of a random value kept in a SameSite=Strict
// cookie: a page of another site can neither read the cookie nor the
// token, and a token stolen from one browser is no use without its cookie.
const (
	csrfCookie  = "dbq_csrf"
	flashCookie = "dbq_flash"
	csrfField   = "csrf"
)

func (h *handler) sign(kind, v string) string {
	m := hmac.New(sha256.New, h.secret)
	m.Write([]byte(kind + "\x00" + v))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func (h *handler) cookiePath() string { return h.opts.Prefix + "/" }

// csrfToken returns the token for r's forms, setting the cookie it is
// bound to when r has none.
func (h *handler) csrfToken(w http.ResponseWriter, r *http.Request) string {
	if c, err := r.Cookie(csrfCookie); err == nil && len(c.Value) >= 32 {
		return h.sign("csrf", c.Value)
	}
	b := make([]byte, 24)
	rand.Read(b)
	v := base64.RawURLEncoding.EncodeToString(b)
	http.SetCookie(w, &http.Cookie{Name: csrfCookie, Value: v, Path: h.cookiePath(), HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	return h.sign("csrf", v)
}

func (h *handler) validToken(r *http.Request) bool {
	c, err := r.Cookie(csrfCookie)
	if err != nil || len(c.Value) < 32 {
		return false
	}
	got := r.PostFormValue(csrfField)
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(h.sign("csrf", c.Value))) == 1
}

// setFlash leaves msg for the next page the browser shows.
func (h *handler) setFlash(w http.ResponseWriter, r *http.Request, msg string) {
	v := base64.RawURLEncoding.EncodeToString([]byte(msg))
	http.SetCookie(w, &http.Cookie{Name: flashCookie, Value: v + "." + h.sign("flash", v), Path: h.cookiePath(),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil, MaxAge: 60})
}

// takeFlash returns the message setFlash left, if it is ours, and clears it.
func (h *handler) takeFlash(w http.ResponseWriter, r *http.Request) string {
	c, err := r.Cookie(flashCookie)
	if err != nil {
		return ""
	}
	http.SetCookie(w, &http.Cookie{Name: flashCookie, Path: h.cookiePath(), MaxAge: -1})
	v, sig, _ := strings.Cut(c.Value, ".")
	if subtle.ConstantTimeCompare([]byte(sig), []byte(h.sign("flash", v))) != 1 {
		return ""
	}
	b, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil {
		return ""
	}
	return string(b)
}
