#pragma once
// The multi-rank tests run as Boost.Test programs inside one MpiSession per process (see
// main.cpp); test cases reach the session through this accessor.
#include <ptrain/launch/mpi_session.hpp>

namespace ptrain::test {
MpiSession& session();
}
