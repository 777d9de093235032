// Preloaded (LD_PRELOAD) into every rank of a two_hosts run. MPICH 4.0.2 (Debian 12, ch4:ucx)
// closes its UCX endpoints in MPI_Finalize with ucp_disconnect_nb, which waits for the peer,
// and only then enters a blocking PMI barrier. Over TCP a rank that got there first no longer
// serves its connections, so the other one waits forever: about 1 run in 10 hung here, 1 in 3
// when the ranks reach MPI_Finalize 0.3 s apart (later MPICH releases hold the PMI barrier
// before the disconnect). Leaving the endpoints to ucp_worker_destroy, which releases them
// without the peer, is safe there: MPI_Finalize requires all communication to be complete.
#include <ucp/api/ucp.h>

extern "C" ucs_status_ptr_t ucp_disconnect_nb(ucp_ep_h /*endpoint*/) { return UCS_STATUS_PTR(UCS_OK); }
