package postgres_test

import (
	"context"
	"log"
	"time"

	"github.com/dbqueue/dbq/postgres"
	"github.com/dbqueue/dbq/queue"
	"github.com/jackc/pgx/v5/pgxpool"
)

// A producer and a worker on the user's own pool. (Not run: it needs a
// server.)
func ExampleNew() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://app@127.0.0.1:5432/app")
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	cfg := postgres.Config{Strategy: postgres.Advisory}
	if err := postgres.Migrate(ctx, pool, cfg); err != nil { // or `dbq migrate up`
		log.Fatal(err)
	}
	q, err := postgres.New(pool, cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer q.Close()

	// Enqueue in the same transaction as the business write.
	tx, err := pool.Begin(ctx)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := q.EnqueueTx(ctx, tx, queue.NewJob{Queue: "email", Payload: []byte(`{"to":"a@b.c"}`)}); err != nil {
		log.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		log.Fatal(err)
	}

	w, err := queue.NewWorker(q, func(ctx context.Context, j *queue.Job) error {
		log.Printf("sending %s", j.Payload)
		return nil
	}, queue.WorkerConfig{Queue: "email", Concurrency: 4})
	if err != nil {
		log.Fatal(err)
	}
	runCtx, stop := context.WithTimeout(ctx, time.Minute)
	defer stop()
	if err := w.Run(runCtx); err != nil {
		log.Fatal(err)
	}
}
