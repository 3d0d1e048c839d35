package mysql

import (
	"cmp"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/queue"
	mysqldrv "github.com/go-sql-driver/mysql"
)

// driverConfig parses a DSN in either form Open takes — the CLI's
// mysql://user:pass@host:3306/db?params or the driver's own
// user:pass@tcp(host:3306)/db?params — once, and sets the dialect's
// options. Its errors wrap queue.ErrInvalidConfig and never hold the
// password.
func driverConfig(dsn string) (*mysqldrv.Config, error) {
	form, err := driverForm(dsn)
	if err != nil {
		return nil, err
	}
	mc, err := mysqldrv.ParseDSN(form)
	if err != nil {
		// The driver's message quotes no DSN, but be sure.
		return nil, fmt.Errorf("%w: mysql: bad DSN %s: %s", queue.ErrInvalidConfig, dialect.Redact(dsn), dialect.Redact(err.Error()))
	}
	mc.ParseTime = true
	mc.Loc = time.UTC
	mc.RejectReadOnly = true
	mc.InterpolateParams = true
	if mc.Params == nil {
		mc.Params = map[string]string{}
	}
	return mc, nil
}

// driverForm returns s in the go-sql-driver/mysql form: a
// mysql://user:pass@host:port/db?opts URL becomes
// user:pass@tcp(host:port)/db?opts, the host 127.0.0.1 and the port 3306
// by default; anything else is taken to be in that form already.
func driverForm(s string) (string, error) {
	if !strings.HasPrefix(strings.ToLower(s), "mysql://") {
		return s, nil
	}
	u, err := url.Parse(s)
	if err != nil {
		return "", fmt.Errorf("%w: mysql: bad DSN %q", queue.ErrInvalidConfig, dialect.Redact(s))
	}
	user := ""
	if u.User != nil {
		user = u.User.Username()
		if p, ok := u.User.Password(); ok {
			user += ":" + p
		}
		user += "@"
	}
	host := cmp.Or(u.Host, "127.0.0.1")
	if u.Port() == "" {
		host += ":3306"
	}
	query := ""
	if u.RawQuery != "" {
		query = "?" + u.RawQuery
	}
	return user + "tcp(" + host + ")/" + strings.TrimPrefix(u.Path, "/") + query, nil
}
