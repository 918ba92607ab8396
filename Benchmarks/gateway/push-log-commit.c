// The gateway push log's group commit in plain C against the system SQLite, without the
// gateway around it (docs/benchmarks.md, Gateway, "Commit thread (branch s5-store)"): the v3/v4
// gw_pushes table and its (device_no, seq) index, WAL, synchronous=FULL, no auto-checkpoint;
// BATCH rows (332-byte payload) per transaction, optionally an acknowledgement UPDATE of the
// previous batch (seq BETWEEN), a PASSIVE checkpoint from a second connection every CKPT frames.
// Prints the thread CPU per row of the commits and of the checkpoints.
//   cc -O2 -o /tmp/push-log-commit push-log-commit.c push-log-wal-buffer.c -lsqlite3
//   /tmp/push-log-commit DB PAGESIZE auto|explicit|autoexplicit ACKS(0|1) ROWS BATCH CKPT [CACHE_SIZE]
// auto: seq by AUTOINCREMENT (v3); explicit: seq bound by the caller, no AUTOINCREMENT, one
// reservation UPDATE per batch (here every batch: the worst case of v4); SHIM=1 in the
// environment: WAL writes through push-log-wal-buffer.c (what WALWriteBuffer.swift does).
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
static double tcpu(void){struct timespec t;clock_gettime(CLOCK_THREAD_CPUTIME_ID,&t);return t.tv_sec+t.tv_nsec*1e-9;}
static double wall(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
#define CK(x) do{int rc=(x); if(rc!=SQLITE_OK&&rc!=SQLITE_DONE&&rc!=SQLITE_ROW){fprintf(stderr,"%s:%d %s\n",#x,__LINE__,sqlite3_errmsg(db));exit(1);}}while(0)
static int walframes=0;
static int hook(void*c,sqlite3*d,const char*n,int p){walframes=p;return 0;}
int main(int argc,char**argv){
  const char*path=argv[1]; int ps=atoi(argv[2]); const char*mode=argv[3]; int acks=atoi(argv[4]);
  int rows=atoi(argv[5]); int batch=atoi(argv[6]); int ckpt=atoi(argv[7]); int cache=argc>8?atoi(argv[8]):-2000;
  unlink(path); char b[512]; snprintf(b,512,"%s-wal",path); unlink(b); snprintf(b,512,"%s-shm",path); unlink(b);
  extern void shim_register(void); if(getenv("SHIM")) shim_register();
  sqlite3*db; CK(sqlite3_open(path,&db));
  snprintf(b,512,"PRAGMA page_size=%d",ps); CK(sqlite3_exec(db,b,0,0,0));
  CK(sqlite3_exec(db,"PRAGMA journal_mode=WAL",0,0,0));
  CK(sqlite3_exec(db,"PRAGMA synchronous=FULL",0,0,0));
  CK(sqlite3_exec(db,"PRAGMA wal_autocheckpoint=0",0,0,0));
  snprintf(b,512,"PRAGMA cache_size=%d",cache); CK(sqlite3_exec(db,b,0,0,0));
  int autoinc=strcmp(mode,"explicit")!=0; int explicit_=strcmp(mode,"auto")!=0;
  snprintf(b,512,"CREATE TABLE gw_pushes (seq INTEGER PRIMARY KEY %s, device_no INTEGER NOT NULL, target_no INTEGER NOT NULL,"
    "apns_id TEXT NOT NULL, push_type TEXT NOT NULL, priority INTEGER NOT NULL, collapse_id TEXT,"
    "expires_at INTEGER NOT NULL, accepted_at INTEGER NOT NULL, stored_at INTEGER NOT NULL,"
    "delivered_at INTEGER, discarded_at INTEGER, discard_reason TEXT, presented_at INTEGER,"
    "answered_at INTEGER, payload BLOB NOT NULL)", autoinc?"AUTOINCREMENT":"");
  CK(sqlite3_exec(db,b,0,0,0));
  CK(sqlite3_exec(db,"CREATE INDEX gw_pushes_device ON gw_pushes(device_no, seq); CREATE TABLE meta(k INTEGER PRIMARY KEY, v INTEGER); INSERT INTO meta VALUES(1,0)",0,0,0));
  sqlite3*ck; CK(sqlite3_open(path,&ck)); CK(sqlite3_exec(ck,"PRAGMA synchronous=FULL",0,0,0));
  sqlite3_wal_hook(db,hook,0);
  sqlite3_stmt*ins,*ack,*meta;
  CK(sqlite3_prepare_v2(db, explicit_?"INSERT INTO gw_pushes (seq,device_no,target_no,apns_id,push_type,priority,collapse_id,expires_at,accepted_at,stored_at,payload) VALUES (?,?,?,?,?,?,?,?,?,?,?)"
     :"INSERT INTO gw_pushes (device_no,target_no,apns_id,push_type,priority,collapse_id,expires_at,accepted_at,stored_at,payload) VALUES (?,?,?,?,?,?,?,?,?,?)",-1,&ins,0));
  CK(sqlite3_prepare_v2(db,"UPDATE gw_pushes SET delivered_at = ? WHERE seq BETWEEN ? AND ? AND delivered_at IS NULL",-1,&ack,0));
  CK(sqlite3_prepare_v2(db,"UPDATE meta SET v=? WHERE k=1",-1,&meta,0));
  char payload[332]; memset(payload,'x',332);
  long long seq=0, lastFirst=-1,lastLast=-1; double cpu=0,ck_cpu=0,w0=wall(); long long now=1763800000000LL; int commits=0,cks=0;
  for(int done=0;done<rows;){
    double c0=tcpu();
    CK(sqlite3_exec(db,"BEGIN IMMEDIATE",0,0,0));
    long long first=seq+1;
    for(int i=0;i<batch&&done<rows;i++,done++){
      char id[40]; snprintf(id,40,"%08x-0000-4000-8000-%012llx",rand(),(long long)done);
      int k=1; if(explicit_) sqlite3_bind_int64(ins,k++,++seq); else ++seq;
      sqlite3_bind_int64(ins,k++,1); sqlite3_bind_int64(ins,k++,1);
      sqlite3_bind_text(ins,k++,id,36,SQLITE_STATIC); sqlite3_bind_text(ins,k++,"alert",5,SQLITE_STATIC);
      sqlite3_bind_int64(ins,k++,10); sqlite3_bind_null(ins,k++); sqlite3_bind_int64(ins,k++,now+86400000LL*30);
      sqlite3_bind_int64(ins,k++,now); sqlite3_bind_int64(ins,k++,now); sqlite3_bind_blob(ins,k++,payload,332,SQLITE_STATIC);
      CK(sqlite3_step(ins)); sqlite3_reset(ins);
    }
    if(explicit_&&!autoinc){ sqlite3_bind_int64(meta,1,seq); CK(sqlite3_step(meta)); sqlite3_reset(meta);}
    if(acks&&lastFirst>0){ sqlite3_bind_int64(ack,1,now); sqlite3_bind_int64(ack,2,lastFirst); sqlite3_bind_int64(ack,3,lastLast); CK(sqlite3_step(ack)); sqlite3_reset(ack);}
    lastFirst=first; lastLast=seq;
    CK(sqlite3_exec(db,"COMMIT",0,0,0)); commits++;
    cpu+=tcpu()-c0; now+=1;
    if(walframes>=ckpt){ double c1=tcpu(); sqlite3_wal_checkpoint_v2(ck,"main",SQLITE_CHECKPOINT_PASSIVE,0,0); ck_cpu+=tcpu()-c1; cks++; walframes=0;}
  }
  printf("%s ps=%d acks=%d batch=%d ckpt=%d cache=%d: commit %.2f us/row, ckpt %.2f us/row, wall %.2f us/row, %d commits %d ckpts\n",
    mode,ps,acks,batch,ckpt,cache,cpu/rows*1e6,ck_cpu/rows*1e6,(wall()-w0)/rows*1e6,commits,cks);
  return 0;
}
