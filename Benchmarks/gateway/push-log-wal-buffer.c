// The WAL write buffer of Sources/TidingsSQLite/Gateway/WALWriteBuffer.swift in C, for
// push-log-commit.c: a VFS over the default one that gathers consecutive writes to WAL files
// into one write of up to 0x1ffff bytes (the unix VFS's limit per pwrite), written out before
// sync, read, size, truncate, fetch and close. Registered as the default VFS by shim_register().
#include <stdio.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
typedef struct { sqlite3_file base; sqlite3_file *real; int wal; unsigned char *buf; sqlite3_int64 off; int len, cap; } CF;
static sqlite3_vfs *orig; static sqlite3_vfs shim;
#define R(f) (((CF*)(f))->real)
static int flush(CF*c){ if(!c->len) return SQLITE_OK; int rc=c->real->pMethods->xWrite(c->real,c->buf,c->len,c->off); if(rc) fprintf(stderr,"flush rc=%d len=%d off=%lld\n",rc,c->len,(long long)c->off); c->len=0; return rc; }
static int xClose(sqlite3_file*f){CF*c=(CF*)f; int rc=flush(c); int rc2=c->real->pMethods->xClose(c->real); free(c->buf); return rc?rc:rc2;}
static int xRead(sqlite3_file*f,void*b,int n,sqlite3_int64 o){CF*c=(CF*)f;int rc=flush(c);if(rc)return rc;return R(f)->pMethods->xRead(R(f),b,n,o);}
static int xWrite(sqlite3_file*f,const void*b,int n,sqlite3_int64 o){CF*c=(CF*)f;
  if(!c->wal) return R(f)->pMethods->xWrite(R(f),b,n,o);
  if(c->len && o!=c->off+c->len){int rc=flush(c); if(rc) return rc;}
  if(c->len+n>c->cap){int rc=flush(c); if(rc) return rc; if(n>c->cap) return R(f)->pMethods->xWrite(R(f),b,n,o);}
  if(!c->len) c->off=o; memcpy(c->buf+c->len,b,n); c->len+=n; return SQLITE_OK;}
static int xTruncate(sqlite3_file*f,sqlite3_int64 s){int rc=flush((CF*)f);if(rc)return rc;return R(f)->pMethods->xTruncate(R(f),s);}
static int xSync(sqlite3_file*f,int fl){int rc=flush((CF*)f);if(rc)return rc;return R(f)->pMethods->xSync(R(f),fl);}
static int xFileSize(sqlite3_file*f,sqlite3_int64*s){int rc=flush((CF*)f);if(rc)return rc;return R(f)->pMethods->xFileSize(R(f),s);}
static int xLock(sqlite3_file*f,int l){return R(f)->pMethods->xLock(R(f),l);}
static int xUnlock(sqlite3_file*f,int l){return R(f)->pMethods->xUnlock(R(f),l);}
static int xCRL(sqlite3_file*f,int*o){return R(f)->pMethods->xCheckReservedLock(R(f),o);}
static int xFC(sqlite3_file*f,int op,void*a){return R(f)->pMethods->xFileControl(R(f),op,a);}
static int xSS(sqlite3_file*f){return R(f)->pMethods->xSectorSize(R(f));}
static int xDC(sqlite3_file*f){return R(f)->pMethods->xDeviceCharacteristics(R(f));}
static int xShmMap(sqlite3_file*f,int i,int s,int e,void volatile**p){return R(f)->pMethods->xShmMap(R(f),i,s,e,p);}
static int xShmLock(sqlite3_file*f,int o,int n,int fl){return R(f)->pMethods->xShmLock(R(f),o,n,fl);}
static void xShmBarrier(sqlite3_file*f){R(f)->pMethods->xShmBarrier(R(f));}
static int xShmUnmap(sqlite3_file*f,int d){return R(f)->pMethods->xShmUnmap(R(f),d);}
static int xFetch(sqlite3_file*f,sqlite3_int64 o,int a,void**p){int rc=flush((CF*)f);if(rc)return rc;return R(f)->pMethods->xFetch(R(f),o,a,p);}
static int xUnfetch(sqlite3_file*f,sqlite3_int64 o,void*p){return R(f)->pMethods->xUnfetch(R(f),o,p);}
static const sqlite3_io_methods M={3,xClose,xRead,xWrite,xTruncate,xSync,xFileSize,xLock,xUnlock,xCRL,xFC,xSS,xDC,xShmMap,xShmLock,xShmBarrier,xShmUnmap,xFetch,xUnfetch};
static int xOpen(sqlite3_vfs*v,const char*n,sqlite3_file*f,int fl,int*out){CF*c=(CF*)f; memset(c,0,sizeof(CF)); c->real=(sqlite3_file*)(c+1);
  int rc=orig->xOpen(orig,n,c->real,fl,out); if(rc) {return rc;}
  c->wal=(fl&SQLITE_OPEN_WAL)!=0; if(c->wal){c->cap=0x1ffff;c->buf=malloc(c->cap);} c->base.pMethods=&M; return SQLITE_OK;}
void shim_register(void){orig=sqlite3_vfs_find(0); shim=*orig; shim.zName="walbuf"; shim.szOsFile=sizeof(CF)+orig->szOsFile; shim.xOpen=xOpen; sqlite3_vfs_register(&shim,1);}
