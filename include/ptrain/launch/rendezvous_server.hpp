#pragma once
// Rank 0's side of a launch by URL (url_rendezvous.hpp): one thread serving one TCP port to
//  - the other ranks' control connections: "ptrain-hello rank=R size=N host=H" on arrival,
//    "done" after their MPI_Finalize; the server answers "welcome", or "abort code=C <why>"
//    when the job must end;
//  - every rank's MPI (MPICH's PMI-1 client, pointed here by PMI_PORT and PMI_ID): the
//    key-value space, barriers and node map MPICH needs to wire up MPI_COMM_WORLD, i.e. the
//    part of mpiexec's process manager a job needs once its processes are started.
// It ends the whole job (every rank, with the code and a message naming the rank) when a rank
// does not arrive within the timeout, says something inconsistent, calls MPI_Abort, or goes
// away before it is done. Rank 0 itself ends from this thread then.
#include <poll.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "ptrain/core/log.hpp"
#include "ptrain/launch/tcp_socket.hpp"
#include "ptrain/launch/url_launch.hpp"

namespace ptrain::detail {

// "cmd=put kvsname=k key=a value=b" -> {cmd: put, kvsname: k, key: a, value: b}
inline std::map<std::string, std::string> key_values(const std::string& line) {
  std::map<std::string, std::string> values;
  std::istringstream words(line);
  for (std::string word; words >> word;) {
    const std::size_t equals = word.find('=');
    if (equals != std::string::npos) values[word.substr(0, equals)] = word.substr(equals + 1);
  }
  return values;
}

// MPICH's PMI_process_mapping: one (node, 1, count) block per run of consecutive ranks on one
// host, nodes numbered in order of first appearance, e.g. hosts a,a,b -> (vector,(0,1,2),(1,1,1)).
inline std::string process_mapping(const std::vector<std::string>& host_of_rank) {
  std::vector<std::string> nodes;
  std::string mapping = "(vector";
  for (std::size_t r = 0; r < host_of_rank.size();) {
    std::size_t end = r;
    while (end < host_of_rank.size() && host_of_rank[end] == host_of_rank[r]) ++end;
    auto node = std::find(nodes.begin(), nodes.end(), host_of_rank[r]);
    if (node == nodes.end()) node = nodes.insert(nodes.end(), host_of_rank[r]);
    mapping += ",(" + std::to_string(node - nodes.begin()) + ",1," + std::to_string(end - r) + ")";
    r = end;
  }
  return mapping + ")";
}

class RendezvousServer {
 public:
  RendezvousServer(LineSocket listener, UrlLaunch launch, std::string host)
      : listener_(std::move(listener)),
        launch_(std::move(launch)),
        hosts_(static_cast<std::size_t>(launch_.world_size)),
        done_(static_cast<std::size_t>(launch_.world_size), false) {
    hosts_[0] = std::move(host);
    done_[0] = true;  // rank 0 is this process: its end is finish()
    arrived_ = 1;
    started_ = LaunchClock::now();
    thread_ = std::thread([this] { serve(); });
  }
  ~RendezvousServer() {
    rank0_done_ = true;
    stop_now_ = true;
    if (thread_.joinable()) thread_.join();
  }
  RendezvousServer(const RendezvousServer&) = delete;
  RendezvousServer& operator=(const RendezvousServer&) = delete;

  // After rank 0's MPI_Finalize: serves until every other rank is done (their MPI_Finalize needs
  // this server), at most the launch timeout, then stops.
  void finish() {
    rank0_done_ = true;
    if (thread_.joinable()) thread_.join();
  }

 private:
  enum class Kind { unknown, control, pmi };
  struct Peer {
    LineSocket socket;
    Kind kind = Kind::unknown;
    int rank = -1;
    bool in_barrier = false;
    bool finalized = false;
    bool waits_for_mapping = false;
  };

  void serve() {
    std::optional<LaunchClock::time_point> finishing_since;
    while (!stop_now_) {
      if (rank0_done_) {
        if (std::all_of(done_.begin(), done_.end(), [](bool d) { return d; })) return;
        if (!finishing_since) finishing_since = LaunchClock::now();
        if (LaunchClock::now() - *finishing_since > launch_.timeout) {
          log_line("rank 0: the rendezvous at " + launch_.url() + ": rank(s)" + ranks_where(false, done_) +
                       " did not finish within " + std::to_string(launch_.timeout.count()) +
                       " s of rank 0; rank 0 ends anyway",
                   stderr);
          return;
        }
      }
      std::vector<pollfd> polled{{listener_.fd(), POLLIN, 0}};
      for (const auto& peer : peers_) polled.push_back({peer->socket.fd(), POLLIN, 0});
      ::poll(polled.data(), polled.size(), 50);
      if (polled[0].revents & POLLIN) {
        auto socket = accept_connection(listener_);
        if (socket.is_open()) peers_.push_back(std::make_unique<Peer>(Peer{std::move(socket)}));
      }
      for (std::size_t i = 1; i < polled.size(); ++i) {
        if (polled[i].revents == 0) continue;
        Peer& peer = *peers_[i - 1];
        if (!peer.socket.receive()) {
          closed(peer);
          continue;
        }
        while (auto line = peer.socket.next_line()) handle(peer, *line);
      }
      std::erase_if(peers_, [](const auto& peer) { return !peer->socket.is_open(); });
      if (arrived_ < launch_.world_size && LaunchClock::now() - started_ > launch_.timeout) {
        std::vector<bool> present(hosts_.size());
        for (std::size_t r = 0; r < hosts_.size(); ++r) present[r] = !hosts_[r].empty();
        end_job(1, "rank(s)" + ranks_where(false, present) + " of world size " + std::to_string(launch_.world_size) +
                       " did not reach the rendezvous at " + launch_.url() + " within " +
                       std::to_string(launch_.timeout.count()) + " s (PTRAIN_RENDEZVOUS_TIMEOUT)");
      }
    }
  }

  static std::string ranks_where(bool value, const std::vector<bool>& flags) {
    std::string ranks;
    for (std::size_t r = 0; r < flags.size(); ++r)
      if (flags[r] == value) ranks += " " + std::to_string(r);
    return ranks;
  }

  void handle(Peer& peer, const std::string& line) {
    if (peer.kind == Kind::unknown) return greet(peer, line);
    if (peer.kind == Kind::control) {
      if (line == "done") done_[static_cast<std::size_t>(peer.rank)] = true;
      return;
    }
    serve_pmi(peer, line);
  }

  void greet(Peer& peer, const std::string& line) {
    auto values = key_values(line);
    if (line.rfind("ptrain-hello ", 0) == 0) {
      const int rank = std::atoi(values["rank"].c_str()), size = std::atoi(values["size"].c_str());
      const std::string who = "the process that says it is rank " + values["rank"] + " (host " + values["host"] + ")";
      if (size != launch_.world_size)
        end_job(1, who + " was given world size " + values["size"] + ", rank 0 world size " +
                       std::to_string(launch_.world_size));
      if (rank < 1 || rank >= launch_.world_size)
        end_job(1, who + ": its rank is not in [1, " + std::to_string(launch_.world_size) + ")");
      if (!hosts_[static_cast<std::size_t>(rank)].empty())
        end_job(1, "two processes say they are rank " + values["rank"] + " (hosts " +
                       hosts_[static_cast<std::size_t>(rank)] + " and " + values["host"] + ")");
      peer.kind = Kind::control;
      peer.rank = rank;
      hosts_[static_cast<std::size_t>(rank)] = values["host"].empty() ? "?" : values["host"];
      ++arrived_;
      peer.socket.send_line("welcome");
      if (arrived_ == launch_.world_size) answer_mapping_requests();
    } else if (values["cmd"] == "initack" && !values["pmiid"].empty()) {
      peer.kind = Kind::pmi;
      peer.rank = std::atoi(values["pmiid"].c_str());
      peer.socket.send_line("cmd=initack");
      peer.socket.send_line("cmd=set size=" + std::to_string(launch_.world_size));
      peer.socket.send_line("cmd=set rank=" + std::to_string(peer.rank));
      peer.socket.send_line("cmd=set debug=0");
    } else {
      log_line("rank 0: ignored a connection to " + launch_.url() + " that began with '" + line.substr(0, 80) + "'",
               stderr);
      peer.socket.close();
    }
  }

  void serve_pmi(Peer& peer, const std::string& line) {
    auto values = key_values(line);
    const std::string& cmd = values["cmd"];
    if (cmd == "init") {
      peer.socket.send_line("cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0");
    } else if (cmd == "get_maxes") {
      peer.socket.send_line("cmd=maxes kvsname_max=256 keylen_max=64 vallen_max=1024");
    } else if (cmd == "get_appnum") {
      peer.socket.send_line("cmd=appnum appnum=0");
    } else if (cmd == "get_my_kvsname") {
      peer.socket.send_line("cmd=my_kvsname kvsname=ptrain");
    } else if (cmd == "get_universe_size") {
      peer.socket.send_line("cmd=universe_size size=" + std::to_string(launch_.world_size));
    } else if (cmd == "put") {
      kvs_[values["key"]] = values["value"];
      peer.socket.send_line("cmd=put_result rc=0 msg=success");
    } else if (cmd == "get" && values["key"] == "PMI_process_mapping") {
      peer.waits_for_mapping = true;
      if (arrived_ == launch_.world_size) answer_mapping_requests();
    } else if (cmd == "get") {
      const auto found = kvs_.find(values["key"]);
      peer.socket.send_line(found == kvs_.end() ? "cmd=get_result rc=-1 msg=key_" + values["key"] + "_not_found"
                                                : "cmd=get_result rc=0 msg=success value=" + found->second);
    } else if (cmd == "barrier_in") {
      peer.in_barrier = true;
      const auto waiting = std::count_if(peers_.begin(), peers_.end(), [](const auto& p) { return p->in_barrier; });
      if (waiting == launch_.world_size) {
        for (auto& p : peers_) {
          if (!p->in_barrier) continue;
          p->in_barrier = false;
          p->socket.send_line("cmd=barrier_out");
        }
      }
    } else if (cmd == "finalize") {
      peer.finalized = true;
      peer.socket.send_line("cmd=finalize_ack");
    } else if (cmd == "abort") {
      const int code = std::atoi(values["exitcode"].c_str());
      end_job(code, "rank " + std::to_string(peer.rank) + " called MPI_Abort (exit code " + values["exitcode"] +
                        "): ending every rank");
    } else {
      end_job(1, "rank " + std::to_string(peer.rank) + "'s MPI sent a PMI command this launcher does not serve: '" +
                     line.substr(0, 120) + "'");
    }
  }

  void answer_mapping_requests() {
    const std::string mapping = process_mapping(hosts_);
    for (auto& p : peers_) {
      if (!p->waits_for_mapping) continue;
      p->waits_for_mapping = false;
      p->socket.send_line("cmd=get_result rc=0 msg=success value=" + mapping);
    }
  }

  void closed(Peer& peer) {
    peer.socket.close();
    const bool finished = peer.kind == Kind::unknown || (peer.kind == Kind::pmi && peer.finalized) ||
                          (peer.kind == Kind::control && done_[static_cast<std::size_t>(peer.rank)]);
    if (!finished)
      end_job(1, "rank " + std::to_string(peer.rank) + " went away before it finished (its connection to " +
                     launch_.url() + " closed: the process ended or was killed)");
  }

  // Tells every other rank to end with code, then ends rank 0 (this process) with it.
  [[noreturn]] void end_job(int code, const std::string& why) {
    if (code == 0) code = 1;
    log_line("rank 0: " + why, stderr);
    for (auto& p : peers_)
      if (p->kind == Kind::control && p->socket.is_open())
        p->socket.send_line("abort code=" + std::to_string(code) + " " + why);
    std::fflush(stdout);
    std::_Exit(code);
  }

  LineSocket listener_;
  UrlLaunch launch_;
  std::vector<std::string> hosts_;  // by rank; empty until the rank arrived
  std::vector<bool> done_;          // by rank
  int arrived_ = 0;
  LaunchClock::time_point started_;
  std::vector<std::unique_ptr<Peer>> peers_;
  std::map<std::string, std::string> kvs_;
  std::atomic<bool> rank0_done_{false};
  std::atomic<bool> stop_now_{false};
  std::thread thread_;
};

}  // namespace ptrain::detail
