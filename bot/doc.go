// Package bot is the engine: it runs the pipeline as durable jobs. New
// series, commands from any transport and cron ticks become River jobs
// that go lore -> builder -> lab -> reports through the stages'
// interfaces (Stages, which wire fills), survive crashes, run the lab
// rounds and bisect mainline regressions. It imports no stage. Its own
// parts are the database (bot/store), the kernels lab workers fetch
// (bot/artifact) and the bisection (bot/bisect); what uses the engine
// from outside (GitHub, the dashboard, the A/A bench, reproducers) is
// under clients/.
package bot
