// SPDX-License-Identifier: Apache-2.0
// Who am I in this job (from the launcher's environment), and a small TCP key-value store,
// hosted by rank 0, for exchanging UCX worker addresses, remote keys and the NCCL unique id.
// The store also watches every rank's connection: a rank whose connection closes without a
// goodbye is reported lost to every other rank.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "tessera/transport/transport.hpp"

namespace tessera::transport {

class PortReservation;

/// This process's place in the job.
struct LaunchEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  /// Per-job secret every store message must carry (TESSERA_JOB_TOKEN; see detect_launch_env).
  std::string job_token;
  /// Which launcher's variables were used: "tessera/torchrun", "slurm", "openmpi" or "none".
  std::string source = "none";
  /// Rank 0: a socket already bound to master_port on store_bind_address(*this) (see
  /// PortReservation), which rendezvous() hands to the store instead of binding the port again,
  /// so the port is never free in between. rendezvous() takes it out of the holder (copies of
  /// this LaunchEnv share the holder; it is taken once). Null: the store binds master_port, or
  /// adopts the socket `tessera launch` passed down (inherited_store_socket).
  std::shared_ptr<PortReservation> store_socket;
};

/// Reads the environment, in order: RANK/WORLD_SIZE/LOCAL_RANK/LOCAL_WORLD_SIZE (tessera
/// launch, torchrun), SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID/SLURM_NTASKS_PER_NODE (srun),
/// OMPI_COMM_WORLD_RANK/_SIZE/_LOCAL_RANK/_LOCAL_SIZE (mpirun); none of them: a world of one.
/// MASTER_ADDR/MASTER_PORT name the store (Slurm: first host of SLURM_JOB_NODELIST and a port
/// derived from SLURM_JOB_ID when unset). The token is job_token_from_env(); it is never derived
/// from a launcher's job ID, which other users can read. Throws ValueError naming the variable
/// for malformed values or a missing token when world_size > 1.
LaunchEnv detect_launch_env();

/// The job's secret: TESSERA_JOB_TOKEN, else the contents of the file TESSERA_JOB_TOKEN_FILE
/// names (trailing whitespace dropped), else "". The file must be a regular file owned by this
/// user that no other user can read (mode 600 or stricter). Throws ValueError/IOError naming the
/// variable or file when the file fails those checks or the token is shorter than 16 characters.
std::string job_token_from_env();
/// The token in `path`, checked as job_token_from_env() checks TESSERA_JOB_TOKEN_FILE; errors
/// name `source` (default "TESSERA_JOB_TOKEN_FILE=<path>"; the CLI passes "--token-file <path>").
std::string read_token_file(const std::string& path, const std::string& source = "");

/// A random 256-bit token as 64 hex characters from the kernel's CSPRNG (what `tessera launch`
/// puts in TESSERA_JOB_TOKEN).
std::string generate_job_token();

/// The address rank 0's store listens on: TESSERA_STORE_BIND when set (e.g. 0.0.0.0 for every
/// interface); else loopback when every rank runs on this host (local_world_size ==
/// world_size), else MASTER_ADDR (the address the other hosts reach rank 0 by).
std::string store_bind_address(const LaunchEnv& env);

/// A TCP socket bound to a port as rank 0's store binds it (IPv4, SO_REUSEADDR) but not
/// listening: a reservation of the port. While it is open, Linux hands the port to no bind() to
/// port 0 and to no connect() of any process (both skip ports a bound socket holds), while a
/// socket that sets SO_REUSEADDR can still bind it and listen (the store, torch's TCPStore with
/// either of its backends). A StoreServer can take the socket over and listen on it, so the port
/// is never free between the reservation and the store. Closes the socket when destroyed.
class PortReservation {
 public:
  PortReservation() = default;
  /// Binds `bind_address` (resolved as the store resolves it) : `port` (0: a free port the
  /// kernel picks). Throws ValueError when the address does not resolve, IOError when the bind
  /// fails.
  explicit PortReservation(const std::string& bind_address, int port = 0);
  /// Takes over `fd` when it is an IPv4 TCP socket bound to a port (listening or not; it is
  /// marked close-on-exec); otherwise leaves `fd` alone and returns an empty reservation.
  static PortReservation adopt(int fd);
  ~PortReservation();
  PortReservation(PortReservation&& other) noexcept;
  PortReservation& operator=(PortReservation&& other) noexcept;
  PortReservation(const PortReservation&) = delete;
  PortReservation& operator=(const PortReservation&) = delete;

  bool valid() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  int port() const { return port_; }
  /// The bound address in network byte order.
  uint32_t address() const { return address_; }
  /// The descriptor, which the caller now owns; the reservation is left empty.
  int release();

 private:
  int fd_ = -1;
  int port_ = 0;
  uint32_t address_ = 0;
};

/// The variable through which `tessera launch` hands the rank that hosts the store (rank 0) the
/// socket it reserved for it when it picked the port itself: "FD:PORT", FD inherited.
inline constexpr const char* kStoreSocketEnv = "TESSERA_STORE_SOCKET";

/// The socket `tessera launch` passed down for a store on `port` (kStoreSocketEnv), taken at
/// most once per process. Empty when the variable is unset, names another port, was taken
/// already, or its descriptor is not an IPv4 TCP socket bound to that port (a process between
/// the launcher and this one closed it, e.g. Python's subprocess does; the store then binds
/// the port itself, as without a launcher). Throws ValueError when the value is not FD:PORT.
PortReservation inherited_store_socket(int port);

/// The store's server. Rank 0 runs one for the lifetime of its transport.
///
/// Before a peer is authenticated it costs the store a fixed 80-byte buffer and one descriptor,
/// for at most 5 s, with at most 64 such peers at a time (the oldest is dropped to make room);
/// no length field it sends is read. A peer authenticates by answering a random challenge with
/// an HMAC-SHA256 under the job token, so the token never crosses the wire, and the store
/// proves in turn that it knows the token. Authenticated messages are bounded (keys 4 KiB,
/// values 64 MiB). Every rank's watch connection carries a heartbeat both ways: a rank silent
/// for `heartbeat_s` is reported lost, as a closed connection is.
class StoreServer {
 public:
  /// Listens on `bind_address`:`port` (port 0: any free port, see port()). `world_size` ranks
  /// are expected; every connection must prove it knows `token`.
  StoreServer(int port, int world_size, std::string token,
              const std::string& bind_address = "127.0.0.1", double heartbeat_s = 15);
  /// Listens on the socket of `reserved` (see PortReservation), which it takes over: its port
  /// is port(). Throws ValueError when the reservation is empty or bound to another address
  /// than `bind_address`, IOError when listen() fails (e.g. another socket listens on the port
  /// already).
  StoreServer(PortReservation reserved, int world_size, std::string token,
              const std::string& bind_address = "127.0.0.1", double heartbeat_s = 15);
  ~StoreServer();
  StoreServer(const StoreServer&) = delete;
  StoreServer& operator=(const StoreServer&) = delete;
  int port() const { return port_; }
  /// Stops accepting and closes every connection (the destructor does it too).
  void stop();
  /// Connections refused or dropped before authentication so far.
  uint64_t refused_connections() const;

  struct Impl;

 private:
  int port_ = 0;
  std::unique_ptr<Impl> impl_;
};

/// Called from the watch thread when the store reports a rank lost (or the store itself died,
/// which is reported as rank 0).
using LostCallback = std::function<void(int rank, const std::string& reason)>;

/// One rank's connection to the store.
class StoreClient {
 public:
  /// Connects (retrying until `timeout_s`) and authenticates with the token; throws
  /// TimeoutError naming the address when no store answers, ValueError when the store refuses
  /// the token or rank, IOError when the server is not a Tessera store or cannot prove it knows
  /// the token. `heartbeat_s`: see watch().
  StoreClient(const std::string& host, int port, int rank, int world_size, const std::string& token,
              double timeout_s, double heartbeat_s = 15);
  ~StoreClient();
  StoreClient(const StoreClient&) = delete;
  StoreClient& operator=(const StoreClient&) = delete;

  void set(const std::string& key, ByteView value);
  /// Waits until `key` exists (at most timeout_s) and returns its value. On timeout throws
  /// TimeoutError whose message includes `waiting_for` (e.g. "rank 2's UCX address") and `peer`.
  Bytes get(const std::string& key, double timeout_s, const std::string& waiting_for = "",
            int peer = -1);

  /// Opens a second connection on which the store pushes notices, handled on a background
  /// thread: `on_lost(r, reason)` when rank r's connection closed without a goodbye (or, as rank
  /// 0, when the store itself went away), `on_left(r, "")` when rank r said goodbye (finished,
  /// possibly early because of an error). The connection carries a heartbeat both ways: a rank
  /// that stays silent for `heartbeat_s` (frozen by SIGSTOP or a debugger, or on a host that
  /// vanished) is reported lost to the others, and rank 0's store falling silent as long is
  /// reported as rank 0 lost. Call once.
  void watch(LostCallback on_lost, LostCallback on_left = nullptr);
  /// Goodbye: tells the store this rank is finishing cleanly and waits (at most timeout_s) until
  /// every rank has said goodbye or was lost, so nobody tears down while a peer still needs it.
  /// Returns false on timeout. After this, connection loss is no longer reported.
  bool finish(double timeout_s);

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

/// Rendezvous of one rank: starts the store on rank 0, connects, and watches for lost ranks.
struct Rendezvous {
  LaunchEnv env;
  std::unique_ptr<StoreServer> server;  // rank 0 only
  std::unique_ptr<StoreClient> client;
};
/// Sets up the rendezvous for `env` with `timeout_s` as connect deadline and `heartbeat_s` as
/// the silence after which a rank counts as lost. Rank 0's store listens on
/// store_bind_address(env); with every rank on this host everyone connects over loopback. Rank
/// 0's store takes over env.store_socket, else inherited_store_socket(env.master_port), when
/// that socket is bound to the store's address; else it binds master_port itself. A world of
/// one without a job token (no launcher) gets a fresh one and, without MASTER_PORT, a free port.
Rendezvous rendezvous(const LaunchEnv& env, double timeout_s, double heartbeat_s = 15);

/// create_transport for an explicit `env` instead of the launcher's environment: e.g. a second
/// transport of the same job (dist::Runtime's device transport) whose rendezvous store must
/// listen on another port than the first one's. `backend` as in create_transport.
std::unique_ptr<Transport> create_transport(const std::string& backend, const LaunchEnv& env,
                                            const Options& options);

}  // namespace tessera::transport
