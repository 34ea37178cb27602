// launch.h — `gpt train --nproc N`: runs N local ranks of this same program,
// each with the environment c10d's rendezvous reads (RANK, LOCAL_RANK,
// WORLD_SIZE, MASTER_ADDR, MASTER_PORT), and supervises them.
#pragma once

namespace cli {

// Re-executes argv without --nproc as ranks 0..nproc-1 and waits for them. When
// one fails the others are stopped (SIGTERM, then SIGKILL after a grace period).
// Returns 0 when all succeed, else the first failure's exit code (1 if signalled).
int launch_local_ranks(int nproc, int argc, char **argv);

}  // namespace cli
