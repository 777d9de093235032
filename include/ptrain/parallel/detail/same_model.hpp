#pragma once
// Every rank must hold the same parameters and buffers, with the same names and shapes, in the
// same order: data parallelism reduces them by position. The descriptions of the entries are
// compared across ranks (comm/detail/same_sequence.hpp), so a communicator of device memory
// (NcclComm) checks the model as well.
#include <string>
#include <vector>

#include "ptrain/comm/communicator.hpp"
#include "ptrain/comm/detail/same_sequence.hpp"

namespace ptrain::detail {

// descriptions: one line per parameter or buffer, e.g. "param layer1.0.conv1.weight [64, 64, 3, 3]".
template <Communicator C>
void check_same_model(C& comm, const std::vector<std::string>& descriptions, const char* who) {
  const std::string subject = std::string(who) + ": the model differs between ranks";
  check_same_sequence(comm, descriptions,
                      {subject.c_str(), "nothing (its model has fewer entries)", "; every rank must build the same model"});
}

}  // namespace ptrain::detail
