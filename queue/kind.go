package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/dbqueue/dbq/dialect"
)

// Args is the arguments of a typed job. Kind names what the job is; it is
// stored with the job, so it must stay the same across deploys (a renamed
// kind leaves its stored jobs without a handler). A kind is 1 to 100
// bytes of letters, digits and "_.:-" ([ValidateKind]).
//
//	type SendEmail struct {
//		To      string `json:"to"`
//		Subject string `json:"subject"`
//	}
//
//	func (SendEmail) Kind() string { return "send_email" }
type Args interface {
	Kind() string
}

// TypedJob is a claimed job with its payload decoded into Args.
type TypedJob[T Args] struct {
	*Job
	Args T
}

// Codec turns Args into a job's payload and back. The default is
// [JSONCodec].
type Codec interface {
	Marshal(v any) ([]byte, error)
	Unmarshal(data []byte, v any) error
}

// JSONCodec is encoding/json.
type JSONCodec struct{}

// Marshal is json.Marshal.
func (JSONCodec) Marshal(v any) ([]byte, error) { return json.Marshal(v) }

// Unmarshal is json.Unmarshal.
func (JSONCodec) Unmarshal(data []byte, v any) error { return json.Unmarshal(data, v) }

// ErrUnknownKind is the error a [Kinds] handler gives a job whose kind no
// handler in this process knows. The job is retried with backoff — a
// rolling deploy may be about to add the handler — and is dead after its
// attempts, like any failing job: never completed, never lost.
var ErrUnknownKind = errors.New("dbq: no handler for the job's kind")

// ErrBadArgs is the error a [Kinds] handler gives a job whose payload does
// not decode into its kind's Args. It is permanent: the job is dead at once
// and keeps its payload for inspection and retry.
var ErrBadArgs = errors.New("dbq: job payload does not decode into its kind's args")

// KindOptions are the defaults of one kind, set where it is registered.
// Zero fields fall back to the [Kinds] and Queue defaults.
type KindOptions struct {
	// Queue is the queue the kind's jobs go to. Default KindsConfig.Queue.
	Queue string
	// Priority of the kind's jobs, lower first. Default 0.
	Priority int16
	// MaxAttempts of the kind's jobs. Default the Queue's Config.MaxAttempts.
	MaxAttempts int
	// Timeout bounds one run of the handler: its context ends after
	// Timeout. Default none (the Worker's own shutdown still applies).
	Timeout time.Duration
}

// KindsConfig configures [NewKinds].
type KindsConfig struct {
	// Codec encodes Args. Default JSONCodec.
	Codec Codec
	// Queue is where jobs of a kind registered with no Queue go. Default
	// "default".
	Queue string
	// Logger receives a warning for every job of an unknown kind. Default
	// the Queue's logger.
	Logger *slog.Logger
}

// Kinds is the registry of job kinds a process knows: their Args types,
// defaults and handlers. Producers use it to enqueue typed jobs with their
// kind's defaults; workers use [Kinds.Handler] so that one [Worker] runs
// every kind of its queue. Register kinds with [Handle] or [Declare] before
// use; a Kinds is then safe for concurrent use.
type Kinds struct {
	q     *Queue
	cfg   KindsConfig
	mu    sync.RWMutex
	kinds map[string]*kind
}

type kind struct {
	opts    KindOptions
	handler func(ctx context.Context, j *Job) error // nil: declared only
}

// NewKinds returns an empty registry for q.
func NewKinds(q *Queue, cfg KindsConfig) (*Kinds, error) {
	if q == nil {
		return nil, fmt.Errorf("%w: NewKinds: nil Queue", ErrInvalidConfig)
	}
	if cfg.Codec == nil {
		cfg.Codec = JSONCodec{}
	}
	if cfg.Queue == "" {
		cfg.Queue = "default"
	}
	if err := dialect.ValidateQueue(cfg.Queue); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = q.cfg.Logger
	}
	return &Kinds{q: q, cfg: cfg, kinds: map[string]*kind{}}, nil
}

// Handle registers the kind of T with its defaults and its handler. A
// job of that kind is decoded into T with the registry's codec and handed
// to h; h's error is treated as a [Handler]'s. A payload that does not
// decode, or that decodes to a nil pointer when T is one (JSON null), is
// [ErrBadArgs]. Registering a kind twice is an error.
func Handle[T Args](k *Kinds, opts KindOptions, h func(ctx context.Context, job *TypedJob[T]) error) error {
	if h == nil {
		return fmt.Errorf("%w: Handle: nil handler", ErrInvalidConfig)
	}
	// A payload of null decodes into a nil pointer without an error; a
	// handler of pointer args would get none to read.
	pointer := reflect.TypeFor[T]().Kind() == reflect.Pointer
	return register[T](k, opts, func(ctx context.Context, j *Job) error {
		var args T
		if err := k.cfg.Codec.Unmarshal(j.Payload, &args); err != nil {
			return Permanent(fmt.Errorf("%w: kind %q: %w", ErrBadArgs, j.Kind, err))
		}
		if pointer && reflect.ValueOf(&args).Elem().IsNil() {
			return Permanent(fmt.Errorf("%w: kind %q: the payload decodes to no value (%.20q)", ErrBadArgs, j.Kind, j.Payload))
		}
		return h(ctx, &TypedJob[T]{Job: j, Args: args})
	})
}

// Declare registers the kind of T with its defaults and no handler: what a
// producer that only enqueues needs. A Worker's [Kinds.Handler] treats
// the kind as unknown.
func Declare[T Args](k *Kinds, opts KindOptions) error {
	return register[T](k, opts, nil)
}

func register[T Args](k *Kinds, opts KindOptions, h func(context.Context, *Job) error) error {
	var zero T
	name := zero.Kind()
	if err := ValidateKind(name); err != nil {
		return err
	}
	if opts.Queue == "" {
		opts.Queue = k.cfg.Queue
	}
	if err := dialect.ValidateQueue(opts.Queue); err != nil {
		return fmt.Errorf("kind %q: %w", name, err)
	}
	if opts.MaxAttempts < 0 || opts.Timeout < 0 {
		return fmt.Errorf("%w: kind %q: negative MaxAttempts or Timeout", ErrInvalidConfig, name)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, dup := k.kinds[name]; dup {
		return fmt.Errorf("%w: kind %q registered twice", ErrInvalidConfig, name)
	}
	k.kinds[name] = &kind{opts: opts, handler: h}
	return nil
}

// MaxKindLen is the longest kind name.
const MaxKindLen = 100

// ValidateKind checks a kind name, the one rule every way of naming a
// kind follows (Enqueue and the Kinds registry, `dbq enqueue --kind`,
// `dbq work --kind KIND=CMD` routes, schedules): 1 to MaxKindLen bytes of
// UTF-8, each character a letter or digit of any script or one of
// "_.:-" — what a queue name may hold, and letters beyond ASCII. So a kind
// never holds "=" (a route splits at the first), a space (which MySQL's
// comparisons ignore at the end) or a control character.
func ValidateKind(name string) error {
	if err := ValidateStoredKind(name); err != nil {
		return err
	}
	for _, r := range name {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) && !strings.ContainsRune("_.:-", r) {
			return fmt.Errorf("%w: kind %q: %q is not a letter, a digit or one of _.:-", ErrInvalidJob, name, r)
		}
	}
	return nil
}

// ValidateStoredKind is the looser check for a kind read from the jobs
// table, where a producer in another language may have stored one that
// [ValidateKind] refuses: 1 to MaxKindLen bytes of UTF-8 text with no
// control characters. Filters (JobFilter.Kind) and moves take such kinds.
func ValidateStoredKind(name string) error {
	if name == "" || len(name) > MaxKindLen {
		return fmt.Errorf("%w: kind %q: want 1 to %d bytes", ErrInvalidJob, name, MaxKindLen)
	}
	if !utf8.ValidString(name) {
		return fmt.Errorf("%w: kind %q: not UTF-8", ErrInvalidJob, name)
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("%w: kind %q: control character", ErrInvalidJob, name)
		}
	}
	return nil
}

// Opts adjusts one typed enqueue. Zero fields keep the kind's defaults.
type Opts struct {
	Queue       string
	Priority    *int16
	MaxAttempts int
	RunAt       time.Time
	Delay       time.Duration
	DedupeKey   string
}

// NewJob encodes args into a NewJob with its kind's defaults and opts. A
// kind not registered here gets the registry's defaults.
func (k *Kinds) NewJob(args Args, opts Opts) (NewJob, error) {
	if args == nil {
		return NewJob{}, fmt.Errorf("%w: nil args", ErrInvalidJob)
	}
	name := args.Kind()
	if err := ValidateKind(name); err != nil {
		return NewJob{}, err
	}
	def := KindOptions{Queue: k.cfg.Queue}
	k.mu.RLock()
	if kd, ok := k.kinds[name]; ok {
		def = kd.opts
	}
	k.mu.RUnlock()
	payload, err := k.cfg.Codec.Marshal(args)
	if err != nil {
		return NewJob{}, fmt.Errorf("%w: kind %q: encode args: %w", ErrInvalidJob, name, err)
	}
	j := NewJob{Queue: def.Queue, Kind: name, Payload: payload, Priority: def.Priority,
		MaxAttempts: def.MaxAttempts, RunAt: opts.RunAt, Delay: opts.Delay, DedupeKey: opts.DedupeKey}
	if opts.Queue != "" {
		j.Queue = opts.Queue
	}
	if opts.Priority != nil {
		j.Priority = *opts.Priority
	}
	if opts.MaxAttempts != 0 {
		j.MaxAttempts = opts.MaxAttempts
	}
	return j, nil
}

// Enqueue stores typed jobs atomically, each with its kind's defaults, in
// its own transaction, and returns their IDs in order.
func (k *Kinds) Enqueue(ctx context.Context, args ...Args) ([]int64, error) {
	return k.EnqueueTx(ctx, nil, args...)
}

// EnqueueTx is Enqueue in the caller's transaction tx (see
// [Queue.EnqueueTx]).
func (k *Kinds) EnqueueTx(ctx context.Context, tx any, args ...Args) ([]int64, error) {
	jobs := make([]NewJob, len(args))
	for i, a := range args {
		j, err := k.NewJob(a, Opts{})
		if err != nil {
			return nil, fmt.Errorf("job %d: %w", i, err)
		}
		jobs[i] = j
	}
	return k.q.EnqueueTx(ctx, tx, jobs...)
}

// Handler returns the Handler that runs every registered kind: it finds
// the job's kind, decodes its payload and calls the kind's handler within
// the kind's Timeout. A job of a kind with no handler here fails with
// [ErrUnknownKind] (retried with backoff, logged as a warning); one whose
// payload does not decode is dead at once with [ErrBadArgs].
func (k *Kinds) Handler() Handler {
	return func(ctx context.Context, j *Job) error {
		k.mu.RLock()
		kd := k.kinds[j.Kind]
		k.mu.RUnlock()
		if kd == nil || kd.handler == nil {
			k.cfg.Logger.Warn("dbq: no handler for the job's kind; it will be retried",
				"kind", j.Kind, "queue", j.Queue, "id", j.ID, "attempt", j.Attempt+1, "max_attempts", j.MaxAttempts)
			return fmt.Errorf("%w: kind %q", ErrUnknownKind, j.Kind)
		}
		if kd.opts.Timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, kd.opts.Timeout)
			defer cancel()
		}
		return kd.handler(ctx, j)
	}
}

// Known returns, sorted, the registered kinds that have a handler and go
// to queueName ("" for every queue): what a process can run there, for
// its logs or health endpoint.
func (k *Kinds) Known(queueName string) []string {
	k.mu.RLock()
	defer k.mu.RUnlock()
	var out []string
	for name, kd := range k.kinds {
		if kd.handler != nil && (queueName == "" || kd.opts.Queue == queueName) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}
